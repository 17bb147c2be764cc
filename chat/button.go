package chat

// Action IDs of the buttons the bot puts on messages. Adapters pass them back in Click.
const (
	// ActionApprove approves the plan named by the button value.
	ActionApprove = "approve"
	// ActionDeny denies the plan named by the button value.
	ActionDeny = "deny"
	// ActionPlanPrefix starts the action ID of a "make a plan" button: "plan:<kind>", with the
	// cluster name as the button value.
	ActionPlanPrefix = "plan:"
)
