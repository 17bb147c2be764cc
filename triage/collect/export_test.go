package collect

// For the external test package (fix_render_test.go), which renders answers through package
// bot; bot imports collect, so a test of package collect cannot import it.
var (
	ScenarioDirs    = scenarioDirs
	OfflineSnapshot = offlineSnapshot
)
