package bot

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// Config is the `whypending serve --config FILE` file (see config.example.yaml). Secrets are
// never written in it: secret keys take {env: NAME} or {file: PATH}.
type Config struct {
	// Listen is the HTTP listen address for /slack/*, /healthz, /readyz, /metrics
	// (default ":8080").
	Listen string `json:"listen"`
	// Clusters are the clusters the bot answers for; the first is the default.
	Clusters []ClusterConfig `json:"clusters"`
	// Slack connects the bot to a Slack app.
	Slack SlackConfig `json:"slack"`
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
}

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

// ChannelsConfig lists channel IDs.
type ChannelsConfig struct {
	// Allowed are the channel IDs where commands are answered; empty allows every channel
	// the app is in.
	Allowed []string `json:"allowed"`
	// Digest are the channel IDs the digest is posted to.
	Digest []string `json:"digest"`
	// Namespaces maps a channel ID to the namespace /why-pending asks about in that channel
	// when no -n is given (for example a team's channel to its namespace); without an entry the
	// cluster's namespace applies.
	Namespaces map[string]string `json:"namespaces"`
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

// ApproversConfig names approvers by platform ID.
type ApproversConfig struct {
	// Users are Slack user IDs ("U…" or "W…").
	Users []string `json:"users"`
	// Groups are Slack user group IDs ("S…"); members are looked up with
	// usergroups.users.list (scope usergroups:read).
	Groups []string `json:"groups"`
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

// Duration is a Go duration string in YAML ("15m", "90s").
type Duration struct {
	time.Duration

	invalid bool // the YAML held something else (reported by ParseConfig with its path)
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
	*d = Duration{Duration: v}
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
	if err := json.Unmarshal(js, &tree); err != nil {
		return nil, fmt.Errorf("parse yaml: %w", err)
	}
	var problems []error
	if tree != nil {
		checkKeys(tree, reflect.TypeOf(Config{}), "", &problems)
	}
	var c Config
	if tree != nil {
		if err := json.Unmarshal(js, &c); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				err = fmt.Errorf("%s: want %s, got %s", te.Field, te.Type, te.Value)
			}
			return nil, errors.Join(append(problems, err)...)
		}
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
	}
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
	slackUserID    = regexp.MustCompile(`^[UW][A-Z0-9]{2,}$`)
	slackGroupID   = regexp.MustCompile(`^S[A-Z0-9]{2,}$`)
	slackChannelID = regexp.MustCompile(`^[CGD][A-Z0-9]{2,}$`)
)

// Validate checks a defaulted config and returns one error per problem, joined, each
// starting with the key path.
func (c *Config) Validate() error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", "%q is not host:port (e.g. \":8080\")", c.Listen)
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
	}{{"slack.signingSecret", c.Slack.SigningSecret}, {"slack.botToken", c.Slack.BotToken}, {"slack.appToken", c.Slack.AppToken}} {
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
	for i, id := range c.Channels.Allowed {
		if !slackChannelID.MatchString(id) {
			bad(fmt.Sprintf("channels.allowed[%d]", i), "%q is not a Slack channel ID (C…, G… or D…)", id)
		}
	}
	for i, id := range c.Channels.Digest {
		if !slackChannelID.MatchString(id) {
			bad(fmt.Sprintf("channels.digest[%d]", i), "%q is not a Slack channel ID (C…, G… or D…)", id)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(c.Channels.Namespaces)) {
		if !slackChannelID.MatchString(id) {
			bad("channels.namespaces", "key %q is not a Slack channel ID (C…, G… or D…)", id)
		}
		if ns := c.Channels.Namespaces[id]; len(validation.IsDNS1123Label(ns)) > 0 {
			bad("channels.namespaces."+id, "%q is not a namespace name", ns)
		}
	}
	ap := c.Approvals.Approvers
	if len(ap.Users) == 0 && len(ap.Groups) == 0 {
		bad("approvals.approvers", "name at least one user or group; otherwise nobody can approve a repair")
	}
	for i, id := range ap.Users {
		if !slackUserID.MatchString(id) {
			bad(fmt.Sprintf("approvals.approvers.users[%d]", i), "%q is not a Slack user ID (U… or W…); user names are not accepted", id)
		}
	}
	for i, id := range ap.Groups {
		if !slackGroupID.MatchString(id) {
			bad(fmt.Sprintf("approvals.approvers.groups[%d]", i), "%q is not a Slack user group ID (S…)", id)
		}
	}
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
	return errors.Join(errs...)
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

// Policy returns the approval policy the config describes.
func (c *Config) Policy() Policy {
	return Policy{
		Users:         c.Approvals.Approvers.Users,
		Groups:        c.Approvals.Approvers.Groups,
		TwoPersonRule: c.Approvals.TwoPersonRule == nil || *c.Approvals.TwoPersonRule,
		Expiry:        c.Approvals.Expiry.Duration,
	}
}
