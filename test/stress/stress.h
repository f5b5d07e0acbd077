/*-------------------------------------------------------------------------
 *
 * stress.h
 *	  Types and functions shared by the files of the idgen_stress client.
 *
 * The program (described in stress_main.c, with a map of its files) runs
 * one thread per connection.  Each thread owns a Client: its connection,
 * its counters and every value it received (a ValueArray).  When all
 * threads are done the main thread checks the values of all clients
 * together.  The functions are declared here file by file.
 *
 * test/stress/stress.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDGEN_STRESS_H
#define IDGEN_STRESS_H

#include <pthread.h>
#include <stdatomic.h>

#include "libpq-fe.h"

#define PROGNAME			"idgen_stress"

/* values kept in memory over all connections, also with --duration */
#define MAX_TOTAL_IDS		INT64CONST(100000000)
#define MAX_DURATION		3600.0

/* a lost connection is retried for this long before giving up */
#define RECONNECT_TIMEOUT	30.0

/* how many order violations, duplicates and error messages to print */
#define MAX_REPORT			5

#define UUID_TEXT_LEN		36

/* key text printed in reports is cut to this many bytes */
#define MAX_KEY_REPORT		64

typedef enum ValueType
{
	VALUE_BIGINT,
	VALUE_UUID
} ValueType;

/* command-line settings; read-only once the threads run */
typedef struct Options
{
	const char *conninfo;
	int			clients;
	int64		ids;			/* values per connection, unless duration */
	int			batch;
	const char *expr;
	ValueType	type;
	bool		strict;
	double		duration;		/* seconds; 0 means generate "ids" values */
	bool		reconnect;
	bool		quiet;
	const char *save;			/* write every value to this file */
	/* sequence mode: keys > 0 */
	int			keys;			/* keys 'k:1' .. 'k:<keys>' besides 'hot' */
	double		hot;			/* probability of the key 'hot' */
	double		rollback;		/* probability of rolling a batch back */
	const char *seq_func;		/* validated identifier, spliced into SQL */
	bool		cached;			/* not transactional: keep every value, no gap check */
	char		hot_text[32];	/* hot and rollback as SQL literals */
	char		rollback_text[32];
} Options;

/* a growable array of fixed-size values */
typedef struct ValueArray
{
	char	   *data;
	size_t		esize;			/* bytes per value */
	size_t		n;				/* values stored */
	size_t		cap;			/* values allocated */
} ValueArray;

/* sequence mode: one committed value of a key (a local or global key id) */
typedef struct SeqValue
{
	int64		value;
	int32		key;
} SeqValue;

/*
 * Interned key strings: key id <-> text, with an open-addressing hash table
 * (ids, -1 for empty) over them.  Keys are arbitrary text without NUL bytes.
 */
typedef struct KeyTable
{
	char	   *text;			/* the keys' text, each NUL-terminated */
	size_t		textlen;
	size_t		textcap;
	size_t	   *offset;			/* key id -> its text */
	uint32	   *length;			/* key id -> length of its text */
	uint32	   *hash;			/* key id -> hash of its text */
	int32		nkeys;
	int32		keycap;
	int32	   *slots;			/* key ids, -1 for an empty slot */
	uint32		nslots;			/* a power of 2, at least 2 * nkeys */
} KeyTable;

/* what the sequence-mode check found */
typedef struct SeqCheck
{
	int64		keys;			/* keys with committed values */
	int64		duplicates;
	int64		gaps;			/* runs of missing values */
	int64		missing;		/* values missing in them */
	int64		below;			/* values below 1 */
	int64		bad_keys;		/* keys with any of these */
} SeqCheck;

/*
 * Start gate: the threads connect, report ready and wait until the main
 * thread opens the gate, which it does once every thread is ready.  If any
 * connection failed, the gate opens with "abort" set and nobody generates.
 */
typedef struct StartGate
{
	pthread_mutex_t lock;
	pthread_cond_t ready_cond;	/* signalled when a thread becomes ready */
	pthread_cond_t open_cond;	/* broadcast when the gate opens */
	int			nready;
	bool		open;
	bool		abort;
} StartGate;

/* state shared by all threads */
typedef struct Shared
{
	const Options *opts;
	StartGate	gate;
	atomic_bool stop;			/* set on a fatal error: everybody quits */
} Shared;

/* per-connection state, owned by its thread until it is joined */
typedef struct Client
{
	int			id;
	Shared	   *shared;
	PGconn	   *conn;
	bool		connected;		/* the initial connection succeeded */
	bool		failed;			/* a fatal error happened, see errmsg */
	bool		capped;			/* --duration run hit the value limit */
	int64		errors;			/* query errors other than connection loss */
	int64		reconnects;		/* connection losses survived */
	ValueArray	values;			/* SeqValue entries in sequence mode */
	/* sequence mode */
	int64		generated;		/* rows of finished batches, incl. rolled back */
	int64		commits;		/* batches committed */
	int64		rollbacks;		/* batches rolled back on purpose */
	int64		in_doubt;		/* connection lost while COMMIT was in flight */
	int64		order_errors;	/* --cached: a key's value not above the last */
	int64	   *last_value;		/* --cached: per local key id, the last value */
	int32		last_cap;
	KeyTable	keytab;			/* key text of this connection's local key ids */
	char		errmsg[1024];
} Client;

/* stress_util.c */
extern void *xmalloc(size_t size);
extern void *xrealloc(void *p, size_t size);
extern double now_seconds(void);
extern const char *strip_message(char *buf, size_t len, const char *msg);
extern void appendf(char *buf, size_t len, const char *fmt,...) pg_attribute_printf(3, 4);

/* the sums over all connections of a run, for the summary */
typedef struct Totals
{
	double		elapsed;		/* seconds from the gate opening to the end */
	bool		capped;			/* some connection hit the value limit */
	int64		values;			/* values kept (committed in sequence mode) */
	int64		errors;
	int64		reconnects;
	/* sequence mode */
	int64		generated;
	int64		commits;
	int64		rollbacks;
	int64		in_doubt;
	int64		order_errors;
} Totals;

/* stress_conn.c */
extern Client *clients_create(const Options *opts, Shared *shared);
extern bool run_clients(const Options *opts, Shared *shared, Client *clients,
						Totals *totals);
extern void clients_free(const Options *opts, Shared *shared, Client *clients);
extern void client_fail(Client *cl, const char *fmt,...) pg_attribute_printf(2, 3);
extern int	next_batch(Client *cl, double start, int64 generated);

/* stress_reconnect.c */
extern bool handle_query_error(Client *cl, PGresult *res, double *last_ok);

/* stress_expr.c */
extern void run_expr_client(Client *cl);
extern bool expr_report(const Options *opts, Client *clients,
						const Totals *totals);

/* stress_seq.c */
extern void run_seq_client(Client *cl);
extern bool seq_report(const Options *opts, Client *clients,
					   const Totals *totals);

/* stress_check.c */
extern void values_reserve(ValueArray *va, size_t more);
extern int	compare_bigint(const void *a, const void *b);
extern int64 check_order(const Options *opts, Client *clients);
extern int64 check_unique(const Options *opts, Client *clients, int64 total);
extern bool save_values(const Options *opts, const Client *clients);

/* stress_seq_check.c */
extern void check_seq(const Options *opts, Client *clients, int64 total,
					  bool check_gaps, SeqCheck *out);

/* stress_keytab.c */
extern void keytable_init(KeyTable *kt);
extern void keytable_free(KeyTable *kt);
extern int32 keytable_intern(KeyTable *kt, const char *key, size_t len);
extern const char *report_key(char *buf, size_t len, const char *key);

#endif							/* IDGEN_STRESS_H */
