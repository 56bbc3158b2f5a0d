package testenv

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// SoakSettings are the settings of a soak, from the environment: TERRASEED_SOAK_OBJECTS
// Infrastructures (40), for at least TERRASEED_SOAK_DURATION (4m) and TERRASEED_SOAK_KILLS
// kills (50).
func SoakSettings(t testing.TB) (objects int, duration time.Duration, kills int) {
	t.Helper()
	objects, duration, kills = 40, 4*time.Minute, 50
	var err error
	if v := os.Getenv("TERRASEED_SOAK_OBJECTS"); v != "" {
		objects, err = strconv.Atoi(v)
	}
	if v := os.Getenv("TERRASEED_SOAK_DURATION"); v != "" && err == nil {
		duration, err = time.ParseDuration(v)
	}
	if v := os.Getenv("TERRASEED_SOAK_KILLS"); v != "" && err == nil {
		kills, err = strconv.Atoi(v)
	}
	if err != nil {
		t.Fatalf("soak settings: %v", err)
	}
	return objects, duration, kills
}
