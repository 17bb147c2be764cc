package bot

import (
	"fmt"
	"slices"
	"strings"

	"github.com/whypending/whypending/chat"
)

// flags is the parsed form of a command's arguments: positional words, --name value pairs and
// boolean --name switches.
type flags struct {
	positional []string
	values     map[string]string
	switches   map[string]bool
}

// parseFlags splits args into positional words and the flags named in allowed ("--cluster C"
// or "--cluster=C"). An unknown flag or a flag without a value is a UserError.
func parseFlags(args []string, allowed ...string) (flags, error) {
	return parseFlagsAndSwitches(args, nil, allowed...)
}

// parseFlagsAndSwitches is parseFlags that also accepts the boolean switches named in switches
// ("--all"), which take no value.
func parseFlagsAndSwitches(args []string, switches []string, allowed ...string) (flags, error) {
	f := flags{values: map[string]string{}, switches: map[string]bool{}}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			f.positional = append(f.positional, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if slices.Contains(switches, name) && !hasValue {
			f.switches[name] = true
			continue
		}
		known := false
		for _, n := range allowed {
			known = known || n == name
		}
		if !known {
			return flags{}, userErrorf("unknown flag %q (flags: %s)", a, flagList(append(append([]string(nil), allowed...), switches...)))
		}
		if !hasValue {
			if i+1 >= len(args) {
				return flags{}, userErrorf("flag %s needs a value", flagName(name))
			}
			i++
			value = args[i]
		}
		f.values[name] = value
	}
	return f, nil
}

func flagList(names []string) string {
	var out []string
	for _, n := range names {
		out = append(out, flagName(n))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// flagName is how a flag is typed: "-n" for a one-letter name, else "--cluster".
func flagName(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

func userErrorf(format string, args ...any) error {
	return &chat.UserError{Text: fmt.Sprintf(format, args...)}
}
