package slack

import (
	"context"
	"errors"
	"fmt"

	"github.com/slack-go/slack"
)

// Identity is whose a bot token is, as Slack's auth.test answers: IDs only, safe to log.
type Identity struct {
	// TeamID is the workspace ("T…"); EnterpriseID its Enterprise Grid organisation, if any.
	TeamID, EnterpriseID string
	// UserID is the bot user ("U…"); BotID the bot ("B…"), empty when the token is not a bot
	// token.
	UserID, BotID string
}

// TokenRefusedError is Slack refusing the bot token: auth.test, or a Web API call the adapter
// made, answered {"ok":false,"error":Code}.
type TokenRefusedError struct {
	// Code is Slack's error code: "invalid_auth", "token_revoked", "account_inactive" …
	Code string
	// Method names the call that was answered so: the Web API method ("auth.test",
	// "chat.postMessage", "chat.update"), or "read messages back" (conversations.history or
	// conversations.replies).
	Method string
}

func (e *TokenRefusedError) Error() string {
	return fmt.Sprintf("the bot token was refused (%s)", e.Code)
}

// slackBusy are the auth.test error codes that say Slack could not answer, not that it
// refused the token: asking again later may succeed.
var slackBusy = map[string]bool{
	"ratelimited": true, "request_timeout": true, "service_unavailable": true,
	"fatal_error": true, "internal_error": true,
	"team_added_to_org": true, // the workspace is migrating into an organisation: calls fail for a while
}

// tokenCodes are the error codes of any Web API method that mean the token itself is refused
// (Slack's errors common to every method), not the call: a channel the bot is not in, a
// message too long.
var tokenCodes = map[string]bool{
	"not_authed": true, "invalid_auth": true, "account_inactive": true, "token_revoked": true,
	"token_expired": true, "not_allowed_token_type": true, "org_login_required": true,
	"ekm_access_denied": true, "two_factor_setup_required": true,
}

// CheckToken asks Slack whose api's token is (auth.test). It returns the token's Identity;
// a *TokenRefusedError when Slack refused the token: any {"ok":false} answer except the few
// codes that say Slack itself is failing or busy (an unknown code counts as a refusal); any
// other error means Slack's verdict was not had (the network, an HTTP 5xx, a 429 as
// *slack.RateLimitedError with its RetryAfter) and asking again later may succeed. The token
// is sent in the form body, so no error names it.
func CheckToken(ctx context.Context, api *slack.Client) (Identity, error) {
	if api == nil {
		return Identity{}, errors.New("no bot token configured")
	}
	r, err := api.AuthTestContext(ctx)
	if err != nil {
		var se slack.SlackErrorResponse
		if errors.As(err, &se) && !slackBusy[se.Err] {
			return Identity{}, &TokenRefusedError{Code: se.Err, Method: "auth.test"}
		}
		return Identity{}, fmt.Errorf("auth.test: %w", err)
	}
	return Identity{TeamID: r.TeamID, EnterpriseID: r.EnterpriseID, UserID: r.UserID, BotID: r.BotID}, nil
}

// tokenRefused returns the refusal err is when Slack answered a call of method with one of
// its token errors (tokenCodes), else nil.
func tokenRefused(err error, method string) *TokenRefusedError {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) && tokenCodes[se.Err] {
		return &TokenRefusedError{Code: se.Err, Method: method}
	}
	return nil
}
