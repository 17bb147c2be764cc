package triage

import "testing"

func TestShellQuote(t *testing.T) {
	tests := []struct{ in, want string }{
		{"web-7f9c5d-abcde", "web-7f9c5d-abcde"},
		{"registry.example.com:5000/shop/api@sha256:ab", "registry.example.com:5000/shop/api@sha256:ab"},
		{"", "''"},
		{"<!channel>", "'<!channel>'"},
		{"a b", "'a b'"},
		{"it's", `'it'\''s'`},
		{"$(rm -rf /)", "'$(rm -rf /)'"},
		{"x;y", "'x;y'"},
		{"*", "'*'"},
	}
	for _, tt := range tests {
		if got := shellQuote(tt.in); got != tt.want {
			t.Errorf("shellQuote(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
