package slack

import (
	"github.com/whypending/whypending/bot/approval"
	"github.com/whypending/whypending/bot/authz"
)

var (
	_ approval.Directory = (*Directory)(nil)
	_ authz.Directory    = (*Directory)(nil)
	_ authz.Profiles     = (*Directory)(nil)
)
