package triage

import "strings"

// shellQuote returns s as one POSIX shell word for a command a user pastes: unchanged when it
// holds only characters no shell treats specially (letters, digits and @%+=:,./_-), else in
// single quotes (a single quote inside is closed, escaped and reopened). Every value from the
// cluster or from the user that goes into a suggested command passes through it, so a name
// such as "<!channel>" or "a;b" can never become a redirection or a second command.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
