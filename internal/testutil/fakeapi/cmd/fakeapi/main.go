// Command fakeapi serves the fake Anthropic Messages API of package
// internal/testutil/fakeapi until SIGTERM or SIGINT. Its first stdout line is
// the base URL (for ANTHROPIC_BASE_URL). With -v it logs each request to
// stderr. With -phrases it prints its trigger phrases, one a line with what
// each does (the playgrounds' banners), and exits.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/kaimon/kaimon/internal/testutil/fakeapi"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address (host:port)")
	verbose := flag.Bool("v", false, "log each request to stderr")
	phrases := flag.Bool("phrases", false, "print the trigger phrases and what each does, and exit")
	indent := flag.String("indent", "", "with -phrases: what begins each line")
	flag.Parse()
	if *phrases {
		if err := fakeapi.WritePhrases(os.Stdout, *indent); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	s, err := fakeapi.StartAddr(*addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if *verbose {
		s.SetLog(os.Stderr)
	}
	fmt.Println(s.URL())
	<-ctx.Done()
	s.Close()
}
