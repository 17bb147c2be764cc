package slack

import "github.com/whypending/whypending/bot"

var _ bot.Directory = (*Directory)(nil)
