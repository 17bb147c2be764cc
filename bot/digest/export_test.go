package digest

import "github.com/robfig/cron/v3"

// SetSchedule replaces s's parsed schedule (tests run rounds every second).
func SetSchedule(s *Scheduler, c cron.Schedule) { s.schedule = c }
