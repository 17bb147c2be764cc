package slack

import (
	"github.com/whypending/whypending/bot/approval"
)

var _ approval.Directory = (*Directory)(nil)
