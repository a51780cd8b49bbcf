/* hang_alarm.h — a test's safety net against a hang: a call that should
 * end well within `seconds` and does not ends the test process, saying
 * which call hung (a timeout that makes no progress, only a failure with
 * a name instead of ctest's silent kill). Test-only. */
#ifndef PTO_TESTS_HANG_ALARM_H
#define PTO_TESTS_HANG_ALARM_H

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char hang_what[200];

static void hang_alarm_fired(int sig) {
  (void)sig;
  static const char msg[] = "hung: ";
  (void)!write(2, msg, sizeof msg - 1);
  (void)!write(2, hang_what, strlen(hang_what));
  (void)!write(2, "\n", 1);
  _exit(1);
}

/* Arms the alarm for the call named `what` (copied). */
static inline void hang_alarm_arm(const char *what, unsigned seconds) {
  snprintf(hang_what, sizeof hang_what, "%s (not done within %u s)", what, seconds);
  signal(SIGALRM, hang_alarm_fired);
  alarm(seconds);
}

static inline void hang_alarm_disarm(void) { alarm(0); }

#endif
