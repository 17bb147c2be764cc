package discord_test

import (
	"testing"

	"github.com/whypending/whypending/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
