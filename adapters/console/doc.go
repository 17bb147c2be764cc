// Package console is the local chat adapter: it reads "/why-pending [ns/]pod" lines from a
// reader and writes each rendered chat.Message as plain text. whypending demo and the
// why-pending CLI use it.
package console
