// Command fakemodels serves the fake model servers of the ACP agents'
// tests, fakeopenai (for opencode and vmlx: agents), fakegemini (for
// gemini-cli) and fakeollama (for ollama: agents), until SIGTERM or SIGINT.
// It prints their base URLs on stdout, one a line: "openai URL",
// "gemini URL" and "ollama URL". With -v it logs each request to stderr.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/kaimon/kaimon/internal/testutil/fakegemini"
	"github.com/kaimon/kaimon/internal/testutil/fakeollama"
	"github.com/kaimon/kaimon/internal/testutil/fakeopenai"
)

func main() {
	verbose := flag.Bool("v", false, "log each request to stderr")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	o, err := fakeopenai.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	g, err := fakegemini.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	l, err := fakeollama.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if *verbose {
		o.SetLog(os.Stderr)
		g.SetLog(os.Stderr)
		l.SetLog(os.Stderr)
	}
	fmt.Println("openai", o.URL())
	fmt.Println("gemini", g.URL())
	fmt.Println("ollama", l.URL())
	<-ctx.Done()
	o.Close()
	g.Close()
	l.Close()
}
