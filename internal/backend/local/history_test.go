package local

import (
	"os"
	"strings"
	"testing"

	"github.com/kaimon/kaimon/internal/config"
)

// A conversation file torn by a crash loads up to its last whole message,
// and the next message starts a line of its own.
func TestHistoryTornTail(t *testing.T) {
	path := config.Paths{CacheDir: t.TempDir()}.Agent("a").History
	h, err := createHistory(path, "s1", Ollama)
	if err != nil {
		t.Fatal(err)
	}
	h.add(Message{Role: "user", Content: "one"})
	h.add(Message{Role: "assistant", Content: "two"})
	h.close()
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"role":"user","cont`)
	f.Close()

	h, err = loadHistory(path, "s1", Ollama)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.msgs) != 2 || h.msgs[1].Content != "two" {
		t.Fatalf("loaded %+v", h.msgs)
	}
	h.add(Message{Role: "user", Content: "three"})
	h.close()
	h, err = loadHistory(path, "s1", Ollama)
	if err != nil || len(h.msgs) != 3 || h.msgs[2].Content != "three" {
		t.Fatalf("after append: %+v %v", h.msgs, err)
	}
	h.close()
	if m := h.messages("sys"); m[0].Role != "system" || m[0].Content != "sys" || len(m) != 4 {
		t.Fatalf("messages: %+v", m)
	}
	// Another session, another family, a missing file: refused by name.
	for _, c := range []struct{ session, family, want string }{{"s2", Ollama, "is gone"}, {"s1", VMLX, "ollama:"}} {
		if _, err := loadHistory(path, c.session, c.family); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v", c, err)
		}
	}
	if _, err := loadHistory(path+".none", "s1", Ollama); err == nil || !strings.Contains(err.Error(), "is gone") {
		t.Errorf("missing file: %v", err)
	}
}
