// Package chat is the vocabulary the bot and the chat adapters speak, and nothing else: a
// platform-neutral Message (Section, Field, Table, Button with a typed Severity and
// ButtonStyle), a Request from a Principal, the Core an adapter drives (Reply, Click, Outcome),
// the Queue that answers acknowledged requests, the Deliverer that waits out rate limits,
// Platforms that route unrequested posts and updates by channel or message reference, the
// adapters' Metrics, text layout helpers (TableLines, Cut, OneLine, DefuseFences), the errors
// whose text is for the person in the chat (UserError, UnavailableError), and PlanButton, the
// one place the "make a plan" button's wire form is written and read.
//
// It imports no package of the module: adapters import chat (and bot only where a file says
// why), and bot, fleet and bot/approval build on it.
package chat
