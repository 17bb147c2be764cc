package digest_test

import (
	"testing"

	"github.com/whypending/whypending/internal/testcluster"
)

func TestMain(m *testing.M) { testcluster.Main(m) }
