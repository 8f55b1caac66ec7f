package config

import (
	"os"
	"path/filepath"
)

// WriteFileAtomic replaces path with data, durably: through a temporary
// file in the same directory (made, mode 0700, when missing), synced,
// renamed over path, and the directory synced, so that a reader sees the
// old file or the new one, never half of one, and a crash right after it
// returns keeps the new one. The agent records, the config file's hosts
// and install-unit's files are all written so.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	// The rename is durable once the directory is.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
