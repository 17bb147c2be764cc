package console

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/whypending/whypending/chat"
)

// Handler answers one command line typed at the console, e.g. "/why-pending shop/web-7f9c".
// It returns the messages to print, in order.
type Handler func(ctx context.Context, line string) []chat.Message

// Renderer writes one message to a terminal: Render (text), or another platform's form of
// it (whypending demo --render discord prints the JSON Discord would receive).
type Renderer func(w io.Writer, m chat.Message) error

// Run reads command lines from in until EOF or ctx is done, answering each through h and
// writing the messages to out with render (nil: Render). prompt is printed before each line
// when non-empty (an interactive terminal). Blank lines and lines starting with # are
// skipped.
func Run(ctx context.Context, in io.Reader, out io.Writer, prompt string, h Handler, render Renderer) error {
	if render == nil {
		render = Render
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for {
		if prompt != "" {
			fmt.Fprint(out, prompt)
		}
		if !sc.Scan() {
			if prompt != "" {
				fmt.Fprintln(out)
			}
			return sc.Err()
		}
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if line == "/quit" || line == "/exit" || line == "quit" || line == "exit" {
			return nil
		}
		for _, m := range h(ctx, line) {
			if err := render(out, m); err != nil {
				return fmt.Errorf("write answer: %w", err)
			}
			fmt.Fprintln(out)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}
