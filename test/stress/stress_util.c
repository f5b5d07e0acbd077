/*-------------------------------------------------------------------------
 *
 * stress_util.c
 *	  Small helpers of the idgen_stress client: memory that cannot fail, the
 *	  monotonic clock, and message text.
 *
 * Running out of memory exits with status 2 (not 1, which means FAIL).
 *
 * test/stress/stress_util.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres_fe.h"

#include <time.h>

#include "stress.h"

/* malloc that exits with status 2 (not 1, which means FAIL) */
void *
xmalloc(size_t size)
{
	void	   *p = malloc(size > 0 ? size : 1);

	if (p == NULL)
	{
		fprintf(stderr, "%s: out of memory (%zu bytes)\n", PROGNAME, size);
		exit(2);
	}
	return p;
}

/* realloc that exits with status 2 */
void *
xrealloc(void *p, size_t size)
{
	void	   *q = realloc(p, size > 0 ? size : 1);

	if (q == NULL)
	{
		fprintf(stderr, "%s: out of memory (%zu bytes)\n", PROGNAME, size);
		exit(2);
	}
	return q;
}

/* seconds on the monotonic clock, for elapsed times */
double
now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

/* copy a libpq message without its trailing newline */
const char *
strip_message(char *buf, size_t len, const char *msg)
{
	size_t		n;

	if (msg == NULL || msg[0] == '\0')
		msg = "(no error message)";
	strlcpy(buf, msg, len);
	n = strlen(buf);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	return buf;
}

/* append to a NUL-terminated buffer, silently cutting at its end */
void
appendf(char *buf, size_t len, const char *fmt,...)
{
	size_t		used = strlen(buf);
	va_list		ap;

	if (used + 1 >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + used, len - used, fmt, ap);
	va_end(ap);
}
