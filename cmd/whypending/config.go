package main

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	yamlv3 "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/whypending/whypending/bot/approval"
	"github.com/whypending/whypending/bot/authz"
	"github.com/whypending/whypending/chat"
)

// Config is the `whypending serve --config FILE` file (see config.example.yaml). Secrets are
// never written in it: secret keys take {env: NAME} or {file: PATH}.
type Config struct {
	// Listen is the HTTP listen address for /slack/*, /discord/interactions, /healthz,
	// /readyz, /metrics (default ":8080").
	Listen string `json:"listen"`
	// PprofListen, when set, serves Go's profiles (net/http/pprof, /debug/pprof/) on their own
	// listener at this host:port, e.g. "127.0.0.1:6060" (off by default). Keep it on
	// loopback: a heap profile shows what the process holds, and it has no authentication.
	PprofListen string `json:"pprofListen"`
	// Clusters are the clusters the bot answers for; the first is the default.
	Clusters []ClusterConfig `json:"clusters"`
	// Slack connects the bot to a Slack app. Slack is served when this section is present,
	// or when neither slack nor discord is (configs from before Discord); see SlackEnabled.
	Slack SlackConfig `json:"slack"`
	// Discord connects the bot to a Discord application; Discord is served when this section
	// is present. Both can run in one process.
	Discord DiscordConfig `json:"discord"`
	// Channels limits where the bot answers and where the digest goes.
	Channels ChannelsConfig `json:"channels"`
	// Approvals is the approval policy.
	Approvals ApprovalsConfig `json:"approvals"`
	// Lock is how repairs use the Calico datastore lock.
	Lock LockConfig `json:"lock"`
	// Digest schedules the daily IPAM digest.
	Digest DigestConfig `json:"digest"`
	// Store is where approval records live.
	Store StoreConfig `json:"store"`
	// Alertmanager makes the bot an Alertmanager webhook receiver (POST /alertmanager) when
	// present.
	Alertmanager *AlertmanagerConfig `json:"alertmanager"`
	// Authorization checks each person against Kubernetes RBAC (off by default).
	Authorization AuthorizationConfig `json:"authorization"`
	// Watch posts stuck workloads unasked (off by default).
	Watch WatchConfig `json:"watch"`

	slackSet, discordSet bool // the file had a slack or a discord section (ParseConfig)
}

// SlackEnabled reports whether the bot serves Slack: the config has a slack section, or has
// no platform section at all (a config written before Discord support).
func (c *Config) SlackEnabled() bool { return c.slackSet || !c.discordSet }

// DiscordEnabled reports whether the bot serves Discord: the config has a discord section.
func (c *Config) DiscordEnabled() bool { return c.discordSet }

// ClusterConfig is one cluster: a kubeconfig (and context) or the in-cluster config.
type ClusterConfig struct {
	// Name is how users refer to the cluster (--cluster NAME), a DNS label.
	Name string `json:"name"`
	// Kubeconfig is a kubeconfig file path; empty uses kubectl's loading rules
	// ($KUBECONFIG, ~/.kube/config).
	Kubeconfig string `json:"kubeconfig"`
	// Context is the kubeconfig context; empty uses the current context.
	Context string `json:"context"`
	// InCluster uses the pod's service account (exclusive with Kubeconfig and Context).
	InCluster bool `json:"inCluster"`
	// Namespace is the default namespace for /why-pending (default "default").
	Namespace string `json:"namespace"`
}

// SlackConfig is the Slack app.
type SlackConfig struct {
	// Mode is "http" (Slack POSTs to /slack/commands and /slack/interactions) or "socket"
	// (Socket Mode, no public URL). Default "http".
	Mode string `json:"mode"`
	// SigningSecret verifies HTTP requests (default {env: SLACK_SIGNING_SECRET}); http mode.
	SigningSecret Secret `json:"signingSecret"`
	// BotToken ("xoxb-…") calls the Web API (default {env: SLACK_BOT_TOKEN}).
	BotToken Secret `json:"botToken"`
	// AppToken ("xapp-…") opens Socket Mode connections (default {env: SLACK_APP_TOKEN});
	// socket mode.
	AppToken Secret `json:"appToken"`
	// APIURL overrides the Web API base URL (tests, proxies); default Slack's.
	APIURL string `json:"apiURL"`
}

// DiscordConfig is the Discord application.
type DiscordConfig struct {
	// Mode is "http" (Discord POSTs interactions to /discord/interactions; set it as the
	// application's Interactions Endpoint URL) or "gateway" (a gateway connection, no public
	// URL; the Interactions Endpoint URL must be empty). Default "http".
	Mode string `json:"mode"`
	// BotToken calls the REST API: command registration, message edits, the digest
	// (default {env: DISCORD_BOT_TOKEN}).
	BotToken Secret `json:"botToken"`
	// PublicKey is the application's Ed25519 public key, 64 hex characters, that verifies
	// X-Signature-Ed25519 (default {env: DISCORD_PUBLIC_KEY}); http mode.
	PublicKey Secret `json:"publicKey"`
	// ApplicationID is the application's ID, a snowflake (required).
	ApplicationID string `json:"applicationID"`
	// Guilds are guild IDs to register the commands in (they appear at once); empty registers
	// them globally (every guild the application is installed in).
	Guilds []string `json:"guilds"`
	// APIURL replaces Discord's base URL "https://discord.com/" (tests, egress proxies);
	// it ends with "/" and the /api/v9/… paths are appended to it.
	APIURL string `json:"apiURL"`
}

// Secret says where a secret is read from: an environment variable or a file (a mounted
// Kubernetes Secret). Writing the secret itself in the config is an error.
type Secret struct {
	// Env names an environment variable holding the secret.
	Env string `json:"env"`
	// File is a path whose content (trailing newline trimmed) is the secret.
	File string `json:"file"`

	inline bool // the YAML held a literal value (rejected by Validate)
}

// UnmarshalJSON accepts {env, file}; a plain string is remembered as inline so Validate can
// reject it with the key path (the value itself is discarded, never echoed).
func (s *Secret) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		*s = Secret{inline: true}
		return nil
	}
	type plain Secret
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*s = Secret(p)
	return nil
}

func (s Secret) set() bool { return s.Env != "" || s.File != "" || s.inline }

// Resolve reads the secret. getenv and readFile are os.LookupEnv and os.ReadFile outside
// tests.
func (s Secret) Resolve(getenv func(string) (string, bool), readFile func(string) ([]byte, error)) (string, error) {
	switch {
	case s.File != "":
		b, err := readFile(s.File)
		if err != nil {
			return "", fmt.Errorf("read secret file: %w", err)
		}
		v := strings.TrimRight(string(b), "\r\n")
		if v == "" {
			return "", fmt.Errorf("secret file %s is empty", s.File)
		}
		return v, nil
	case s.Env != "":
		v, ok := getenv(s.Env)
		if !ok || v == "" {
			return "", fmt.Errorf("environment variable %s is empty or unset", s.Env)
		}
		return v, nil
	}
	return "", errors.New("no env or file given")
}

// ChannelsConfig lists channel IDs: Slack's (C…, G…, D…) and Discord's (snowflakes) may be
// mixed; each ID goes to the platform it has the shape of (ChannelPlatform).
type ChannelsConfig struct {
	// Allowed are the channel IDs where commands are answered; a platform with no ID here
	// answers in every channel the app is in.
	Allowed []string `json:"allowed"`
	// Digest are the channel IDs the digest is posted to.
	Digest []string `json:"digest"`
	// Namespaces maps a channel ID to the namespace /why-pending asks about in that channel
	// when no -n is given (for example a team's channel to its namespace); without an entry the
	// cluster's namespace applies.
	Namespaces map[string]string `json:"namespaces"`
}

// WatchConfig is the watch (bot/watch): stuck workloads posted unasked to the channels of
// channels.digest (every namespace) and of channels.namespaces (that namespace only).
type WatchConfig struct {
	// Enabled turns the watch on (needs store.backend kubernetes).
	Enabled bool `json:"enabled"`
	// Thresholds say how long a pod stays in a state before it is stuck.
	Thresholds WatchThresholds `json:"thresholds"`
	// MaxPostsPer10m bounds the new posts per channel per 10 minutes (default 10).
	MaxPostsPer10m int `json:"maxPostsPer10m"`
	// RemindAfter is the least time between two "still stuck" replies (default "4h").
	RemindAfter Duration `json:"remindAfter"`
	// ExcludeNamespaces are never watched.
	ExcludeNamespaces []string `json:"excludeNamespaces"`
}

// WatchThresholds are watch.thresholds (defaults: pending 5m, imagePull 3m,
// crashLoopRestarts 3, terminating 10m, failedCreate 2m).
type WatchThresholds struct {
	Pending           Duration `json:"pending"`
	ImagePull         Duration `json:"imagePull"`
	CrashLoopRestarts int      `json:"crashLoopRestarts"`
	Terminating       Duration `json:"terminating"`
	FailedCreate      Duration `json:"failedCreate"`
}

// ApprovalsConfig is the approval policy.
type ApprovalsConfig struct {
	// Approvers may approve plans.
	Approvers ApproversConfig `json:"approvers"`
	// Expiry is how long a plan waits for a decision (Go duration, default "15m", 1m-24h).
	Expiry Duration `json:"expiry"`
	// TwoPersonRule forbids the requester from approving their own destructive plan
	// (default true).
	TwoPersonRule *bool `json:"twoPersonRule"`
}

// ApproversConfig names approvers by platform ID, a list per platform: an ID is only ever
// checked against the list of the platform the click came from.
type ApproversConfig struct {
	// Users are Slack user IDs ("U…" or "W…").
	Users []string `json:"users"`
	// Groups are Slack user group IDs ("S…"); members are looked up with
	// usergroups.users.list (scope usergroups:read).
	Groups []string `json:"groups"`
	// Discord are the Discord approvers.
	Discord DiscordApproversConfig `json:"discord"`
}

// DiscordApproversConfig are Discord approvers.
type DiscordApproversConfig struct {
	// Users are Discord user IDs (snowflakes).
	Users []string `json:"users"`
	// Roles are Discord role IDs (snowflakes): a member who has one (member.roles of the
	// interaction, which Discord signs) may approve.
	Roles []string `json:"roles"`
}

// LockConfig is how repairs use the Calico datastore lock.
type LockConfig struct {
	// Policy is "always" (lock ClusterInformation while writing, like calicoctl; new pods wait
	// for the lock) or "never" (rely on per-allocation compare-and-set only). Default
	// "always".
	Policy string `json:"policy"`
	// MaxDuration bounds how long the lock is held (default "2m"); the repair stops and
	// unlocks when it is reached.
	MaxDuration Duration `json:"maxDuration"`
}

// DigestConfig schedules the digest.
type DigestConfig struct {
	// Schedule is a 5-field cron expression, e.g. "0 9 * * 1-5"; empty disables the digest.
	Schedule string `json:"schedule"`
	// Timezone is an IANA zone for Schedule (default "UTC").
	Timezone string `json:"timezone"`
}

// StoreConfig says where approval records live.
type StoreConfig struct {
	// Backend is "kubernetes" (RemediationRequest objects; needs the CRD) or "memory" (lost
	// on restart, one replica only). Default "kubernetes".
	Backend string `json:"backend"`
	// Cluster names the cluster that holds the RemediationRequests (default: the first).
	Cluster string `json:"cluster"`
	// Namespace holds the RemediationRequests (default "whypending").
	Namespace string `json:"namespace"`
}

// AlertmanagerConfig is the Alertmanager receiver: Alertmanager posts each group's
// notifications to POST /alertmanager on the listener, and the bot answers each alert in
// its group's thread (one per group and channel, kept in Notification objects in
// store.namespace of store.cluster).
type AlertmanagerConfig struct {
	// Token is the bearer token Alertmanager sends (its webhook_configs'
	// http_config.authorization.credentials); required, {env: …} or {file: …}.
	Token Secret `json:"token"`
	// Receivers maps an Alertmanager receiver name to the channel IDs its groups are posted
	// in (Slack and Discord IDs may be mixed); required.
	Receivers map[string][]string `json:"receivers"`
	// ClusterLabel is the alert label naming the configured cluster an alert is about
	// (default "cluster"); an alert without it is answered from the first cluster, one
	// naming a cluster that is not configured is shown and not diagnosed (never answered
	// from another cluster).
	ClusterLabel string `json:"clusterLabel"`
	// RemindEvery is the least time between two "still firing" replies in a group's thread
	// when Alertmanager re-sends it unchanged (repeat_interval); default "4h", "0s" turns
	// reminders off.
	RemindEvery *Duration `json:"remindEvery"`
	// URL is Alertmanager's base URL for silences (API v2); when set, a firing group's root
	// has Silence 1h / 4h / 24h buttons, and a silenced one Unsilence.
	URL string `json:"url"`
	// Authorization is an optional bearer token for that API ({env: …} or {file: …}).
	Authorization Secret `json:"authorization"`
	// Silencers says who may silence from chat: "approvers" (approvals.approvers; default)
	// or "channel" (anyone in a channel the bot answers in, channels.allowed).
	Silencers string `json:"silencers"`
}

// AuthorizationConfig is per-user authorization: who a chat user is in Kubernetes, and which
// actions the bot checks with a SubjectAccessReview for that user and their groups before it
// acts (with its own ServiceAccount) or answers.
type AuthorizationConfig struct {
	// Mode is "off" (the default: the approver lists alone decide), "approvals" (planning a
	// repair and deciding a plan are checked) or "all" (answers too). The approver lists and
	// the two-person rule still apply: RBAC only narrows them.
	Mode AuthorizationMode `json:"mode"`
	// CacheTTL is how long a decision is reused (Go duration, default "30s", 1s-10m): a
	// RoleBinding added or removed takes effect within it.
	CacheTTL Duration `json:"cacheTTL"`
	// Slack maps Slack users.
	Slack SlackAuthorizationConfig `json:"slack"`
	// Discord maps Discord users.
	Discord DiscordAuthorizationConfig `json:"discord"`
}

// AuthorizationMode is authorization.mode. YAML 1.1 reads an unquoted off as false, which is
// taken as "off"; any other non-string is kept so that Validate reports it.
type AuthorizationMode string

// UnmarshalJSON accepts a string, or false for "off".
func (m *AuthorizationMode) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch v := v.(type) {
	case string:
		*m = AuthorizationMode(v)
	case bool:
		*m = AuthorizationMode(fmt.Sprint(v))
		if !v {
			*m = AuthorizationMode(authz.ModeOff)
		}
	default:
		*m = AuthorizationMode(fmt.Sprint(v))
	}
	return nil
}

// SlackAuthorizationConfig maps Slack users to Kubernetes identities.
type SlackAuthorizationConfig struct {
	// Users maps a Slack user ID (U… or W…) to a Kubernetes user and groups.
	Users map[string]KubernetesIdentity `json:"users"`
	// Groups maps a Slack user group ID (S…) to Kubernetes groups its members get
	// (usergroups.users.list, scope usergroups:read).
	Groups map[string][]string `json:"groups"`
	// VerifiedEmail makes the verified email of a Slack profile the Kubernetes user name of a
	// user that Users names no user for (users.info; add the scopes users:read and
	// users:read.email to the Slack app).
	VerifiedEmail bool `json:"verifiedEmail"`
	// EmailDomains limits VerifiedEmail to these domains ("example.com"); empty: any.
	EmailDomains []string `json:"emailDomains"`
}

// DiscordAuthorizationConfig maps Discord users to Kubernetes identities.
type DiscordAuthorizationConfig struct {
	// Users maps a Discord user ID (a snowflake) to a Kubernetes user and groups.
	Users map[string]KubernetesIdentity `json:"users"`
	// Roles maps a Discord role ID (a snowflake) to Kubernetes groups its members get (the
	// roles Discord signs into each interaction; none in a direct message).
	Roles map[string][]string `json:"roles"`
}

// KubernetesIdentity is a Kubernetes user name and groups, as RBAC subjects name them.
type KubernetesIdentity struct {
	// User is the Kubernetes user name ("alice@example.com"); may be empty when Groups is not.
	User string `json:"user"`
	// Groups are Kubernetes group names.
	Groups []string `json:"groups"`
}

// Duration is a Go duration string in YAML ("15m", "90s").
type Duration struct {
	time.Duration

	invalid bool // the YAML held something else (reported by ParseConfig with its path)
	set     bool // the YAML held a duration (so "0s" is not taken as unset)
}

// UnmarshalJSON parses a duration string. A malformed value is remembered, not returned, so
// that ParseConfig can report it with its key path next to every other problem.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		*d = Duration{invalid: true}
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		*d = Duration{invalid: true}
		return nil
	}
	*d = Duration{Duration: v, set: true}
	return nil
}

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// LoadConfig reads, defaults and validates a config file. The error lists every problem, one
// per line, each prefixed with its key path.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("config %s:\n%w", path, err)
	}
	return c, nil
}

// ParseConfig parses YAML, applies defaults and validates. The error joins one error per
// problem ("clusters[1].name: required").
func ParseConfig(data []byte) (*Config, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("parse yaml: %w", err)
	}
	var tree any
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil {
		return nil, fmt.Errorf("parse yaml: %w", err)
	}
	var problems []error
	if tree != nil {
		checkKeys(tree, reflect.TypeOf(Config{}), "", &problems)
		// Discord IDs are long numbers that users write without quotes; keep their digits.
		tree = numbersToStrings(tree, reflect.TypeOf(Config{}))
		if js, err = json.Marshal(tree); err != nil {
			return nil, fmt.Errorf("parse yaml: %w", err)
		}
	}
	var c Config
	if tree != nil {
		if err := json.Unmarshal(js, &c); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				if len(problems) > 0 {
					// checkKeys named the value of the wrong shape with its path.
					return nil, errors.Join(problems...)
				}
				err = fmt.Errorf("%s: want %s, got a YAML %s", displayPath(te.Field), te.Type.Kind(), te.Value)
			}
			return nil, errors.Join(append(problems, err)...)
		}
	}
	if msg := modeAsWritten(data); msg != "" {
		problems = append(problems, errors.New("authorization.mode: "+msg))
		c.Authorization.Mode = AuthorizationMode(authz.ModeOff) // reported above, not again by Validate
	}
	if m, ok := tree.(map[string]any); ok {
		_, c.slackSet = m["slack"]
		_, c.discordSet = m["discord"]
	}
	c.applyDefaults()
	if err := c.Validate(); err != nil {
		problems = append(problems, err)
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	return &c, nil
}

// yaml11Bools are the plain scalars YAML 1.1 (sigs.k8s.io/yaml) reads as booleans.
var yaml11Bools = map[string]bool{
	"y": true, "Y": true, "yes": true, "Yes": true, "YES": true, "true": true, "True": true, "TRUE": true, "on": true, "On": true, "ON": true,
	"n": false, "N": false, "no": false, "No": false, "NO": false, "false": false, "False": false, "FALSE": false,
}

// modeAsWritten says what is wrong with authorization.mode as written in the YAML data, ""
// when nothing is (or it is absent): an unquoted YAML 1.1 boolean other than off (on, yes,
// no, true, …: the YAML boolean, not the word) or an empty value (null).
func modeAsWritten(data []byte) string {
	var doc yamlv3.Node
	if yamlv3.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return ""
	}
	n := doc.Content[0]
	for _, key := range []string{"authorization", "mode"} {
		var next *yamlv3.Node
		for i := 0; n.Kind == yamlv3.MappingNode && i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return ""
		}
		n = next
	}
	if n.Kind != yamlv3.ScalarNode || n.Style&(yamlv3.SingleQuotedStyle|yamlv3.DoubleQuotedStyle) != 0 {
		return ""
	}
	if v, ok := yaml11Bools[n.Value]; ok {
		return fmt.Sprintf("%s unquoted is the YAML boolean %t, not a mode; write one of \"off\", \"approvals\" or \"all\", quoted", n.Value, v)
	}
	if n.Tag == "!!null" {
		return `is empty (YAML null); write one of "off", "approvals" or "all", quoted`
	}
	return ""
}

var durationType = reflect.TypeOf(Duration{})

// checkKeys reports keys in tree that t has no field for, and values of the wrong shape,
// with their paths.
func checkKeys(tree any, t reflect.Type, path string, problems *[]error) {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if t == durationType {
			if _, ok := tree.(string); !ok {
				*problems = append(*problems, fmt.Errorf("%s: want a duration string such as \"15m\"", path))
			} else if _, err := time.ParseDuration(tree.(string)); err != nil {
				*problems = append(*problems, fmt.Errorf("%s: %q is not a duration (e.g. \"15m\")", path, tree))
			}
			return
		}
		if t == reflect.TypeOf(Secret{}) {
			if _, ok := tree.(map[string]any); !ok {
				return // a literal secret: Validate reports it
			}
		}
		m, ok := tree.(map[string]any)
		if !ok {
			*problems = append(*problems, fmt.Errorf("%s: want a mapping", displayPath(path)))
			return
		}
		fields := map[string]reflect.StructField{}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
				fields[name] = f
			}
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			f, ok := fields[k]
			if !ok {
				*problems = append(*problems, fmt.Errorf("%s: unknown key", joinPath(path, k)))
				continue
			}
			if m[k] != nil {
				checkKeys(m[k], f.Type, joinPath(path, k), problems)
			}
		}
	case reflect.Slice:
		items, ok := tree.([]any)
		if !ok {
			*problems = append(*problems, fmt.Errorf("%s: want a list", path))
			return
		}
		for i, it := range items {
			checkKeys(it, t.Elem(), fmt.Sprintf("%s[%d]", path, i), problems)
		}
	case reflect.Map:
		m, ok := tree.(map[string]any)
		if !ok {
			*problems = append(*problems, fmt.Errorf("%s: want a mapping", displayPath(path)))
			return
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if m[k] != nil {
				checkKeys(m[k], t.Elem(), joinPath(path, k), problems)
			}
		}
	case reflect.String:
		if reflect.PointerTo(t).Implements(jsonUnmarshaler) {
			return // reads more than strings (AuthorizationMode); Validate reports the rest
		}
		switch tree.(type) {
		case string, json.Number:
		default:
			*problems = append(*problems, fmt.Errorf("%s: want a string, got %s", displayPath(path), yamlKind(tree)))
		}
	case reflect.Bool:
		if _, ok := tree.(bool); !ok {
			*problems = append(*problems, fmt.Errorf("%s: want true or false, got %s", displayPath(path), yamlKind(tree)))
		}
	}
}

var jsonUnmarshaler = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()

// yamlKind names the kind of a YAML value as a config's author sees it.
func yamlKind(v any) string {
	switch v := v.(type) {
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	case bool:
		return fmt.Sprintf("the boolean %t", v)
	case json.Number:
		return "the number " + v.String()
	case string:
		return fmt.Sprintf("%q", v)
	}
	return "an empty value"
}

// numbersToStrings returns tree with every number that sits where t wants a string turned
// into that string, digit for digit: an unquoted snowflake such as 1180000000000000001
// (more digits than a float64 keeps) reads as the ID it looks like.
func numbersToStrings(tree any, t reflect.Type) any {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch v := tree.(type) {
	case json.Number:
		if t.Kind() == reflect.String {
			return string(v)
		}
	case map[string]any:
		if t.Kind() == reflect.Map {
			for k := range v {
				v[k] = numbersToStrings(v[k], t.Elem())
			}
			return tree
		}
		if t.Kind() != reflect.Struct {
			return tree
		}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if x, ok := v[name]; ok && name != "" && name != "-" {
				v[name] = numbersToStrings(x, f.Type)
			}
		}
	case []any:
		if t.Kind() != reflect.Slice {
			return tree
		}
		for i := range v {
			v[i] = numbersToStrings(v[i], t.Elem())
		}
	}
	return tree
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func displayPath(path string) string {
	if path == "" {
		return "(top level)"
	}
	return path
}

func (c *Config) applyDefaults() {
	if c.Listen == "" {
		c.Listen = ":8080"
	}
	if am := c.Alertmanager; am != nil {
		if am.ClusterLabel == "" {
			am.ClusterLabel = "cluster"
		}
		if am.RemindEvery == nil {
			am.RemindEvery = &Duration{Duration: 4 * time.Hour}
		}
		if am.Silencers == "" {
			am.Silencers = "approvers"
		}
	}
	if c.Slack.Mode == "" {
		c.Slack.Mode = "http"
	}
	if !c.Slack.SigningSecret.set() {
		c.Slack.SigningSecret = Secret{Env: "SLACK_SIGNING_SECRET"}
	}
	if !c.Slack.BotToken.set() {
		c.Slack.BotToken = Secret{Env: "SLACK_BOT_TOKEN"}
	}
	if !c.Slack.AppToken.set() {
		c.Slack.AppToken = Secret{Env: "SLACK_APP_TOKEN"}
	}
	if c.Discord.Mode == "" {
		c.Discord.Mode = "http"
	}
	if !c.Discord.BotToken.set() {
		c.Discord.BotToken = Secret{Env: "DISCORD_BOT_TOKEN"}
	}
	if !c.Discord.PublicKey.set() {
		c.Discord.PublicKey = Secret{Env: "DISCORD_PUBLIC_KEY"}
	}
	if c.Approvals.Expiry.Duration == 0 && !c.Approvals.Expiry.invalid {
		c.Approvals.Expiry.Duration = 15 * time.Minute
	}
	if c.Approvals.TwoPersonRule == nil {
		t := true
		c.Approvals.TwoPersonRule = &t
	}
	if c.Lock.Policy == "" {
		c.Lock.Policy = "always"
	}
	if c.Lock.MaxDuration.Duration == 0 && !c.Lock.MaxDuration.invalid {
		c.Lock.MaxDuration.Duration = 2 * time.Minute
	}
	if c.Digest.Timezone == "" {
		c.Digest.Timezone = "UTC"
	}
	if c.Authorization.Mode == "" {
		c.Authorization.Mode = AuthorizationMode(authz.ModeOff)
	}
	if c.Authorization.CacheTTL.Duration == 0 && !c.Authorization.CacheTTL.invalid && !c.Authorization.CacheTTL.set {
		c.Authorization.CacheTTL.Duration = authz.DefaultTTL
	}
	if c.Store.Backend == "" {
		c.Store.Backend = "kubernetes"
	}
	if c.Store.Namespace == "" {
		c.Store.Namespace = "whypending"
	}
	if c.Store.Cluster == "" && len(c.Clusters) > 0 {
		c.Store.Cluster = c.Clusters[0].Name
	}
	for i := range c.Clusters {
		if c.Clusters[i].Namespace == "" {
			c.Clusters[i].Namespace = "default"
		}
	}
}

var (
	slackUserID  = regexp.MustCompile(`^[UW][A-Z0-9]{2,}$`)
	slackGroupID = regexp.MustCompile(`^S[A-Z0-9]{2,}$`)
	// snowflake is a Discord ID: a 64-bit integer in decimal, 17 to 20 digits for anything
	// created since 2015.
	snowflake = regexp.MustCompile(`^[1-9][0-9]{16,19}$`)
)

// Validate checks a defaulted config and returns one error per problem, joined, each
// starting with the key path.
func (c *Config) Validate() error {
	var probs problems
	bad := probs.add
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", "%q is not host:port (e.g. \":8080\")", c.Listen)
	}
	if c.PprofListen != "" {
		if _, _, err := net.SplitHostPort(c.PprofListen); err != nil {
			bad("pprofListen", "%q is not host:port (e.g. \"127.0.0.1:6060\")", c.PprofListen)
		} else if c.PprofListen == c.Listen {
			bad("pprofListen", "%q is also listen: profiles get their own port", c.PprofListen)
		}
	}
	if len(c.Clusters) == 0 {
		bad("clusters", "at least one cluster is required")
	}
	seen := map[string]bool{}
	for i, cl := range c.Clusters {
		p := fmt.Sprintf("clusters[%d]", i)
		switch {
		case cl.Name == "":
			bad(p+".name", "required")
		case len(validation.IsDNS1123Label(cl.Name)) > 0:
			bad(p+".name", "%q must be a DNS label (lower-case letters, digits, '-')", cl.Name)
		case seen[cl.Name]:
			bad(p+".name", "%q is used by another cluster", cl.Name)
		}
		seen[cl.Name] = true
		if cl.InCluster && (cl.Kubeconfig != "" || cl.Context != "") {
			bad(p+".inCluster", "cannot be combined with kubeconfig or context")
		}
		if len(validation.IsDNS1123Label(cl.Namespace)) > 0 {
			bad(p+".namespace", "%q is not a namespace name", cl.Namespace)
		}
	}
	switch c.Slack.Mode {
	case "http", "socket":
	default:
		bad("slack.mode", "%q: want http or socket", c.Slack.Mode)
	}
	for _, s := range []struct {
		path   string
		secret Secret
	}{
		{"slack.signingSecret", c.Slack.SigningSecret}, {"slack.botToken", c.Slack.BotToken}, {"slack.appToken", c.Slack.AppToken},
		{"discord.botToken", c.Discord.BotToken}, {"discord.publicKey", c.Discord.PublicKey},
	} {
		switch {
		case s.secret.inline:
			bad(s.path, "secrets must not be written in the config file; use {env: NAME} or {file: PATH}")
		case s.secret.Env != "" && s.secret.File != "":
			bad(s.path, "give env or file, not both")
		}
	}
	if c.Slack.APIURL != "" && !strings.HasSuffix(c.Slack.APIURL, "/") {
		bad("slack.apiURL", "must end with \"/\"")
	}
	c.validateDiscord(&probs)
	for _, list := range []struct {
		path string
		ids  []string
	}{{"channels.allowed", c.Channels.Allowed}, {"channels.digest", c.Channels.Digest}} {
		for i, id := range list.ids {
			switch platform := chat.ChannelPlatform(id); {
			case platform == "":
				bad(fmt.Sprintf("%s[%d]", list.path, i), "%q is not a Slack channel ID (C…, G… or D…) or a Discord channel ID (a snowflake, 17 to 20 digits)", id)
			case !c.enabled(platform):
				bad(fmt.Sprintf("%s[%d]", list.path, i), "%q is a %s channel, but the config has no %s section", id, platform, platform)
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(c.Channels.Namespaces)) {
		switch platform := chat.ChannelPlatform(id); {
		case platform == "":
			bad("channels.namespaces", "key %q is not a Slack channel ID (C…, G… or D…) or a Discord channel ID (a snowflake, 17 to 20 digits)", id)
		case !c.enabled(platform):
			bad("channels.namespaces", "key %q is a %s channel, but the config has no %s section", id, platform, platform)
		}
		if ns := c.Channels.Namespaces[id]; len(validation.IsDNS1123Label(ns)) > 0 {
			bad("channels.namespaces."+id, "%q is not a namespace name", ns)
		}
	}
	c.validateApprovers(&probs)
	if e := c.Approvals.Expiry.Duration; !c.Approvals.Expiry.invalid && (e < time.Minute || e > 24*time.Hour) {
		bad("approvals.expiry", "%s is outside 1m..24h", e)
	}
	switch c.Lock.Policy {
	case "always", "never":
	default:
		bad("lock.policy", "%q: want always or never", c.Lock.Policy)
	}
	if d := c.Lock.MaxDuration.Duration; !c.Lock.MaxDuration.invalid && (d < 5*time.Second || d > 30*time.Minute) {
		bad("lock.maxDuration", "%s is outside 5s..30m", d)
	}
	if c.Digest.Schedule != "" {
		if _, err := cron.ParseStandard(c.Digest.Schedule); err != nil {
			bad("digest.schedule", "%q is not a 5-field cron expression: %v", c.Digest.Schedule, err)
		}
		if len(c.Channels.Digest) == 0 {
			bad("channels.digest", "required when digest.schedule is set")
		}
	}
	if _, err := time.LoadLocation(c.Digest.Timezone); err != nil {
		bad("digest.timezone", "%q is not an IANA time zone", c.Digest.Timezone)
	}
	switch c.Store.Backend {
	case "kubernetes", "memory":
	default:
		bad("store.backend", "%q: want kubernetes or memory", c.Store.Backend)
	}
	if c.Store.Backend == "kubernetes" && len(c.Clusters) > 0 && !seen[c.Store.Cluster] {
		bad("store.cluster", "%q is not a configured cluster", c.Store.Cluster)
	}
	if len(validation.IsDNS1123Label(c.Store.Namespace)) > 0 {
		bad("store.namespace", "%q is not a namespace name", c.Store.Namespace)
	}
	c.validateAlertmanager(&probs)
	c.validateWatch(&probs)
	c.validateAuthorization(&probs)
	return errors.Join(probs...)
}

func (c *Config) enabled(platform string) bool {
	switch platform {
	case "slack":
		return c.SlackEnabled()
	case "discord":
		return c.DiscordEnabled()
	}
	return false
}

// problems collects one error per config problem, each starting with its key path.
type problems []error

func (p *problems) add(path, format string, args ...any) {
	*p = append(*p, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
}

// validateAlertmanager checks the alertmanager section.
func (c *Config) validateAlertmanager(p *problems) {
	am := c.Alertmanager
	if am == nil {
		return
	}
	switch {
	case am.Token.inline:
		p.add("alertmanager.token", "secrets must not be written in the config file; use {env: NAME} or {file: PATH}")
	case am.Token.Env != "" && am.Token.File != "":
		p.add("alertmanager.token", "give env or file, not both")
	case !am.Token.set():
		p.add("alertmanager.token", "required: the bearer token Alertmanager sends, {env: NAME} or {file: PATH}")
	}
	if len(am.Receivers) == 0 {
		p.add("alertmanager.receivers", "required: Alertmanager receiver name -> channel IDs")
	}
	for _, name := range slices.Sorted(maps.Keys(am.Receivers)) {
		if len(am.Receivers[name]) == 0 {
			p.add("alertmanager.receivers."+name, "no channels")
		}
		for i, id := range am.Receivers[name] {
			switch platform := chat.ChannelPlatform(id); {
			case platform == "":
				p.add(fmt.Sprintf("alertmanager.receivers.%s[%d]", name, i), "%q is not a Slack channel ID (C…, G… or D…) or a Discord channel ID (a snowflake, 17 to 20 digits)", id)
			case !c.enabled(platform):
				p.add(fmt.Sprintf("alertmanager.receivers.%s[%d]", name, i), "%q is a %s channel, but the config has no %s section", id, platform, platform)
			}
		}
	}
	if am.ClusterLabel != "" && !regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`).MatchString(am.ClusterLabel) {
		p.add("alertmanager.clusterLabel", "%q is not a Prometheus label name", am.ClusterLabel)
	}
	if u, err := url.Parse(am.URL); am.URL != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		p.add("alertmanager.url", "%q: want Alertmanager's http(s) base URL, e.g. http://alertmanager.monitoring:9093", am.URL)
	}
	switch {
	case am.Authorization.inline:
		p.add("alertmanager.authorization", "secrets must not be written in the config file; use {env: NAME} or {file: PATH}")
	case am.Authorization.Env != "" && am.Authorization.File != "":
		p.add("alertmanager.authorization", "give env or file, not both")
	}
	switch am.Silencers {
	case "approvers", "channel":
	default:
		p.add("alertmanager.silencers", "%q: want approvers or channel", am.Silencers)
	}
	if am.RemindEvery != nil && !am.RemindEvery.invalid && am.RemindEvery.Duration < 0 {
		p.add("alertmanager.remindEvery", "must not be negative")
	}
	if c.Store.Backend != "kubernetes" {
		p.add("alertmanager", "needs store.backend kubernetes: the alert threads are kept in Notification objects so that nothing is posted twice")
	}
}

// validateWatch checks the watch section.
func (c *Config) validateWatch(p *problems) {
	wc := &c.Watch
	for key, d := range map[string]Duration{"watch.thresholds.pending": wc.Thresholds.Pending, "watch.thresholds.imagePull": wc.Thresholds.ImagePull,
		"watch.thresholds.terminating": wc.Thresholds.Terminating, "watch.thresholds.failedCreate": wc.Thresholds.FailedCreate,
		"watch.remindAfter": wc.RemindAfter} {
		if !d.invalid && d.Duration < 0 {
			p.add(key, "must not be negative")
		}
	}
	if wc.Thresholds.CrashLoopRestarts < 0 {
		p.add("watch.thresholds.crashLoopRestarts", "must not be negative")
	}
	if wc.MaxPostsPer10m < 0 {
		p.add("watch.maxPostsPer10m", "must not be negative")
	}
	if !wc.Enabled {
		return
	}
	if c.Store.Backend != "kubernetes" {
		p.add("watch", "needs store.backend kubernetes: the watch's posts are kept in Notification objects so that nothing is posted twice")
	}
	if len(c.Channels.Digest) == 0 && len(c.Channels.Namespaces) == 0 {
		p.add("watch", "has no channel to post to: list channels in channels.digest (every namespace) or channels.namespaces (one namespace each)")
	}
}

// ResolveAlertmanager reads the receiver's bearer token and, when set, the silences API's.
func (c *Config) ResolveAlertmanager(getenv func(string) (string, bool), readFile func(string) ([]byte, error)) (token, api string, err error) {
	if token, err = c.Alertmanager.Token.Resolve(getenv, readFile); err != nil {
		return "", "", fmt.Errorf("alertmanager.token: %w", err)
	}
	if c.Alertmanager.Authorization.set() {
		if api, err = c.Alertmanager.Authorization.Resolve(getenv, readFile); err != nil {
			return "", "", fmt.Errorf("alertmanager.authorization: %w", err)
		}
	}
	return token, api, nil
}

// validateDiscord checks the discord section (its secrets are checked with the others).
func (c *Config) validateDiscord(p *problems) {
	bad := p.add
	d := c.Discord
	switch d.Mode {
	case "http", "gateway":
	default:
		bad("discord.mode", "%q: want http or gateway", d.Mode)
	}
	switch {
	case !c.DiscordEnabled():
	case d.ApplicationID == "":
		bad("discord.applicationID", "required (the Application ID on the application's General Information page)")
	case !snowflake.MatchString(d.ApplicationID):
		bad("discord.applicationID", "%q is not a Discord ID (a snowflake, 17 to 20 digits)", d.ApplicationID)
	}
	for i, g := range d.Guilds {
		if !snowflake.MatchString(g) {
			bad(fmt.Sprintf("discord.guilds[%d]", i), "%q is not a Discord guild ID (a snowflake, 17 to 20 digits)", g)
		}
	}
	if d.APIURL != "" {
		u, err := url.Parse(d.APIURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || !strings.HasSuffix(d.APIURL, "/") {
			bad("discord.apiURL", "%q: want an http(s) URL ending with \"/\", e.g. \"https://discord.com/\"", d.APIURL)
		}
	}
}

// validateApprovers checks the approver lists: IDs of the right shape for their platform,
// no list for a platform the bot does not serve, and at least one approver somewhere.
func (c *Config) validateApprovers(p *problems) {
	bad := p.add
	before := len(*p)
	ap := c.Approvals.Approvers
	lists := []struct {
		path, platform string
		ids            []string
		shape          *regexp.Regexp
		what           string
	}{
		{"approvals.approvers.users", "slack", ap.Users, slackUserID, "a Slack user ID (U… or W…); user names are not accepted"},
		{"approvals.approvers.groups", "slack", ap.Groups, slackGroupID, "a Slack user group ID (S…)"},
		{"approvals.approvers.discord.users", "discord", ap.Discord.Users, snowflake, "a Discord user ID (a snowflake, 17 to 20 digits); user names are not accepted"},
		{"approvals.approvers.discord.roles", "discord", ap.Discord.Roles, snowflake, "a Discord role ID (a snowflake, 17 to 20 digits); role names are not accepted"},
	}
	some := false
	for _, l := range lists {
		if len(l.ids) > 0 && !c.enabled(l.platform) {
			bad(l.path, "the config has no %s section, so these approvers could never approve", l.platform)
			continue
		}
		some = some || len(l.ids) > 0
		for i, id := range l.ids {
			if !l.shape.MatchString(id) {
				bad(fmt.Sprintf("%s[%d]", l.path, i), "%q is not %s", id, l.what)
			}
		}
	}
	if !some && len(*p) == before {
		bad("approvals.approvers", "name at least one user, group or role; otherwise nobody can approve a repair")
	}
}

// validateAuthorization checks the authorization section: the mode, the TTL, IDs of the right
// shape for their platform, identities that name a user or a group, and, when the mode checks
// anything, at least one person mapped.
func (c *Config) validateAuthorization(p *problems) {
	bad := p.add
	az := c.Authorization
	switch authz.Mode(az.Mode) {
	case authz.ModeOff, authz.ModeApprovals, authz.ModeAll:
	default:
		bad("authorization.mode", "%q: want off, approvals or all", az.Mode)
	}
	if d := az.CacheTTL.Duration; !az.CacheTTL.invalid && (d < time.Second || d > 10*time.Minute) {
		bad("authorization.cacheTTL", "%s is outside 1s..10m", d)
	}
	identities := func(path string, users map[string]KubernetesIdentity, shape *regexp.Regexp, what string) {
		for _, id := range slices.Sorted(maps.Keys(users)) {
			if !shape.MatchString(id) {
				bad(path, "key %q is not %s", id, what)
			}
			k := users[id]
			blank := func(v string) bool { return strings.TrimSpace(v) == "" }
			if k.User == "" && len(k.Groups) == 0 {
				bad(path+"."+id, "name a Kubernetes user or at least one group")
			}
			if k.User != "" && (blank(k.User) || strings.TrimSpace(k.User) != k.User) {
				bad(path+"."+id+".user", "%q has blank space around or in place of a name (RBAC compares user names exactly)", k.User)
			}
			if slices.ContainsFunc(k.Groups, blank) {
				bad(path+"."+id+".groups", "a group name is empty or blank")
			}
		}
	}
	groups := func(path string, m map[string][]string, shape *regexp.Regexp, what string) {
		for _, id := range slices.Sorted(maps.Keys(m)) {
			if !shape.MatchString(id) {
				bad(path, "key %q is not %s", id, what)
			}
			if len(m[id]) == 0 || slices.ContainsFunc(m[id], func(g string) bool { return strings.TrimSpace(g) == "" }) {
				bad(path+"."+id, "list the Kubernetes groups its members get (none may be empty)")
			}
		}
	}
	identities("authorization.slack.users", az.Slack.Users, slackUserID, "a Slack user ID (U… or W…)")
	groups("authorization.slack.groups", az.Slack.Groups, slackGroupID, "a Slack user group ID (S…)")
	identities("authorization.discord.users", az.Discord.Users, snowflake, "a Discord user ID (a snowflake, 17 to 20 digits; quote it)")
	groups("authorization.discord.roles", az.Discord.Roles, snowflake, "a Discord role ID (a snowflake, 17 to 20 digits; quote it)")
	if len(az.Slack.EmailDomains) > 0 && !az.Slack.VerifiedEmail {
		bad("authorization.slack.emailDomains", "applies only with authorization.slack.verifiedEmail: true")
	}
	for i, d := range az.Slack.EmailDomains {
		if len(validation.IsDNS1123Subdomain(strings.ToLower(d))) > 0 {
			bad(fmt.Sprintf("authorization.slack.emailDomains[%d]", i), "%q is not a domain name", d)
		}
	}
	slackMapped := len(az.Slack.Users) > 0 || len(az.Slack.Groups) > 0 || az.Slack.VerifiedEmail
	discordMapped := len(az.Discord.Users) > 0 || len(az.Discord.Roles) > 0
	if slackMapped && !c.SlackEnabled() {
		bad("authorization.slack", "the config has no slack section, so nobody here is ever mapped")
	}
	if discordMapped && !c.DiscordEnabled() {
		bad("authorization.discord", "the config has no discord section, so nobody here is ever mapped")
	}
	if authz.Mode(az.Mode).Checks(authz.Changes) && !slackMapped && !discordMapped {
		bad("authorization", "mode %s checks every person, but nobody is mapped to Kubernetes: map users, groups or roles (or verifiedEmail), or everyone is refused", az.Mode)
	}
}

// AuthorizationOptions returns the per-user authorization options the config describes,
// without the clusters, directories, profiles, metrics and log serve adds.
func (c *Config) AuthorizationOptions() authz.Options {
	az := c.Authorization
	identities := func(in map[string]KubernetesIdentity) map[string]authz.Identity {
		out := map[string]authz.Identity{}
		for id, k := range in {
			groups := slices.Sorted(slices.Values(k.Groups))
			out[id] = authz.Identity{User: k.User, Groups: slices.Compact(groups)}
		}
		return out
	}
	return authz.Options{
		Mode: authz.Mode(az.Mode),
		TTL:  az.CacheTTL.Duration,
		Mappings: map[string]authz.Mapping{
			"slack": {Users: identities(az.Slack.Users), Groups: az.Slack.Groups,
				VerifiedEmail: az.Slack.VerifiedEmail, EmailDomains: az.Slack.EmailDomains},
			"discord": {Users: identities(az.Discord.Users), Groups: az.Discord.Roles},
		},
	}
}

// SlackSecrets are the resolved Slack credentials. They log as "[redacted]".
type SlackSecrets struct {
	SigningSecret, BotToken, AppToken string
}

// LogValue keeps secrets out of slog output.
func (SlackSecrets) LogValue() slog.Value { return slog.StringValue("[redacted]") }

// String keeps secrets out of fmt output.
func (SlackSecrets) String() string { return "[redacted]" }

// ResolveSlack reads the Slack secrets the configured mode needs. getenv and readFile are
// os.LookupEnv and os.ReadFile outside tests. Errors name the key path, never the value.
func (c *Config) ResolveSlack(getenv func(string) (string, bool), readFile func(string) ([]byte, error)) (SlackSecrets, error) {
	var s SlackSecrets
	var errs []error
	get := func(path string, sec Secret, dst *string) {
		v, err := sec.Resolve(getenv, readFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
			return
		}
		*dst = v
	}
	get("slack.botToken", c.Slack.BotToken, &s.BotToken)
	if c.Slack.Mode == "http" {
		get("slack.signingSecret", c.Slack.SigningSecret, &s.SigningSecret)
	} else {
		get("slack.appToken", c.Slack.AppToken, &s.AppToken)
	}
	return s, errors.Join(errs...)
}

// DiscordSecrets are the resolved Discord credentials. They log as "[redacted]".
type DiscordSecrets struct {
	// BotToken is the bot token, without the "Bot " prefix.
	BotToken string
	// PublicKey verifies interactions (http mode; nil in gateway mode).
	PublicKey ed25519.PublicKey
}

// LogValue keeps secrets out of slog output.
func (DiscordSecrets) LogValue() slog.Value { return slog.StringValue("[redacted]") }

// String keeps secrets out of fmt output.
func (DiscordSecrets) String() string { return "[redacted]" }

// ResolveDiscord reads the Discord secrets the configured mode needs: the bot token, and in
// http mode the public key, which must be 64 hex characters. getenv and readFile are
// os.LookupEnv and os.ReadFile outside tests. Errors name the key path, never the value.
func (c *Config) ResolveDiscord(getenv func(string) (string, bool), readFile func(string) ([]byte, error)) (DiscordSecrets, error) {
	var s DiscordSecrets
	var errs []error
	token, err := c.Discord.BotToken.Resolve(getenv, readFile)
	if err != nil {
		errs = append(errs, fmt.Errorf("discord.botToken: %w", err))
	}
	s.BotToken = strings.TrimPrefix(token, "Bot ")
	if c.Discord.Mode == "http" {
		key, err := c.Discord.PublicKey.Resolve(getenv, readFile)
		if err == nil {
			var b []byte
			b, err = hex.DecodeString(strings.TrimSpace(key))
			if err == nil && len(b) != ed25519.PublicKeySize {
				err = fmt.Errorf("want %d hex characters, got %d", 2*ed25519.PublicKeySize, len(strings.TrimSpace(key)))
			}
			if err != nil {
				err = fmt.Errorf("not an Ed25519 public key in hex (the application's Public Key): %w", err)
			}
			s.PublicKey = b
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("discord.publicKey: %w", err))
		}
	}
	return s, errors.Join(errs...)
}

// Policy returns the approval policy the config describes: one approver list per platform.
func (c *Config) Policy() approval.Policy {
	ap := c.Approvals.Approvers
	return approval.Policy{
		Approvers: map[string]approval.Approvers{
			"slack":   {Users: ap.Users, Groups: ap.Groups},
			"discord": {Users: ap.Discord.Users, Groups: ap.Discord.Roles},
		},
		TwoPersonRule: c.Approvals.TwoPersonRule == nil || *c.Approvals.TwoPersonRule,
		Expiry:        c.Approvals.Expiry.Duration,
	}
}

// AllowedChannels returns channels.allowed by platform (see ChannelPlatform), for
// bot.Options.AllowedChannels: a platform none of the IDs belongs to answers everywhere.
func (c *Config) AllowedChannels() map[string][]string {
	out := map[string][]string{}
	for _, id := range c.Channels.Allowed {
		if p := chat.ChannelPlatform(id); p != "" {
			out[p] = append(out[p], id)
		}
	}
	return out
}
