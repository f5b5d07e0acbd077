/*-------------------------------------------------------------------------
 *
 * stress_conn.c
 *	  The connections of the idgen_stress client and their threads.
 *
 * Every connection (-c) is driven by its own thread and has its own Client.
 * All threads connect first and then start generating at the same moment,
 * so that the generator is exercised by truly concurrent backends: each
 * thread connects, reports ready at the start gate and waits; the main
 * thread opens the gate once every thread is ready, or, if any connection
 * failed, opens it with "abort" set and nobody generates.  Each thread then
 * runs the loop of its mode (stress_expr.c or stress_seq.c) until it has
 * generated -n values or --duration is up (next_batch), or until any
 * thread fails (client_fail sets the shared "stop" flag).
 *
 * A connection string may name several hosts (host=a,b ...
 * target_session_attrs=read-write): libpq picks one when connecting, and
 * again when --reconnect re-establishes a lost connection (PQreset, in
 * stress_reconnect.c), so a run can follow a failover.
 *
 * test/stress/stress_conn.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres_fe.h"

#include "stress.h"

/* record a fatal error of this client and make every thread stop */
void
client_fail(Client *cl, const char *fmt,...)
{
	va_list		ap;

	if (!cl->failed)
	{
		va_start(ap, fmt);
		vsnprintf(cl->errmsg, sizeof(cl->errmsg), fmt, ap);
		va_end(ap);
		cl->failed = true;
	}
	atomic_store(&cl->shared->stop, true);
}

/*
 * Print server notices (including the FATAL message of a terminated backend,
 * which arrives outside any query) with the connection number, or not at
 * all with --quiet.
 */
static void
notice_processor(void *arg, const char *message)
{
	Client	   *cl = (Client *) arg;
	char		msg[512];

	if (!cl->shared->opts->quiet)
		fprintf(stderr, "%s: connection %d: %s\n", PROGNAME, cl->id,
				strip_message(msg, sizeof(msg), message));
}

/* connect with -d's connection string (its status is for the caller) */
static PGconn *
open_connection(const char *conninfo)
{
	/*
	 * application_name comes before dbname so that the connection string can
	 * override it, while it still overrides PGAPPNAME from the environment
	 * (test harnesses set that): the tests find our backends by this name.
	 */
	const char *keywords[] = {"application_name", "dbname", NULL};
	const char *values[] = {PROGNAME, conninfo, NULL};

	return PQconnectdbParams(keywords, values, 1);
}

/* report ready and wait for the gate to open; false means abort */
static bool
wait_at_gate(Shared *sh)
{
	StartGate  *gate = &sh->gate;
	bool		abort;

	pthread_mutex_lock(&gate->lock);
	gate->nready++;
	pthread_cond_signal(&gate->ready_cond);
	while (!gate->open)
		pthread_cond_wait(&gate->open_cond, &gate->lock);
	abort = gate->abort;
	pthread_mutex_unlock(&gate->lock);
	return !abort;
}

/*
 * The size of the client's next batch, or 0 when it is done: with
 * --duration, when the time is up or the values kept reach their limit
 * (then 'capped'); otherwise when 'generated' (what -n counts) reaches -n.
 */
int
next_batch(Client *cl, double start, int64 generated)
{
	const Options *opts = cl->shared->opts;
	int64		left;

	if (opts->duration > 0)
	{
		if (now_seconds() - start >= opts->duration)
			return 0;
		left = MAX_TOTAL_IDS / opts->clients - (int64) cl->values.n;
		if (left <= 0)
		{
			cl->capped = true;
			return 0;
		}
	}
	else
		left = opts->ids - generated;
	return left <= 0 ? 0 : (int) Min(left, (int64) opts->batch);
}

/* a connection's thread: connect, wait at the gate, run the mode's loop */
static void *
client_thread(void *arg)
{
	Client	   *cl = (Client *) arg;
	char		msg[512];

	cl->conn = open_connection(cl->shared->opts->conninfo);
	/* survives PQreset, which keeps the PGconn */
	PQsetNoticeProcessor(cl->conn, notice_processor, cl);
	if (PQstatus(cl->conn) == CONNECTION_OK)
		cl->connected = true;
	else
		client_fail(cl, "could not connect: %s",
					strip_message(msg, sizeof(msg), PQerrorMessage(cl->conn)));

	if (wait_at_gate(cl->shared))
	{
		if (cl->shared->opts->keys > 0)
			run_seq_client(cl);
		else
			run_expr_client(cl);
	}
	return NULL;
}

/*
 * Set up the state shared by the threads, with the gate closed, and one
 * Client per connection, each with room for its values.
 */
Client *
clients_create(const Options *opts, Shared *shared)
{
	Client	   *clients;

	shared->opts = opts;
	pthread_mutex_init(&shared->gate.lock, NULL);
	pthread_cond_init(&shared->gate.ready_cond, NULL);
	pthread_cond_init(&shared->gate.open_cond, NULL);
	shared->gate.nready = 0;
	shared->gate.open = false;
	shared->gate.abort = false;
	atomic_init(&shared->stop, false);

	clients = xmalloc(sizeof(Client) * opts->clients);
	for (int i = 0; i < opts->clients; i++)
	{
		Client	   *cl = &clients[i];

		memset(cl, 0, sizeof(Client));
		cl->id = i;
		cl->shared = shared;
		if (opts->keys > 0)
		{
			cl->values.esize = sizeof(SeqValue);
			keytable_init(&cl->keytab);
		}
		else
			cl->values.esize = opts->type == VALUE_BIGINT ? sizeof(int64) : UUID_TEXT_LEN;
		if (opts->duration == 0)
			values_reserve(&cl->values, (size_t) opts->ids);
	}
	return clients;
}

/*
 * Start the threads: each connects and waits at the gate.  Returns how
 * many started; if one could not be created, the rest are not tried.
 */
static int
start_threads(const Options *opts, Client *clients, pthread_t *threads)
{
	int			nstarted = 0;

	for (int i = 0; i < opts->clients; i++)
	{
		int			rc = pthread_create(&threads[i], NULL, client_thread, &clients[i]);

		if (rc != 0)
		{
			fprintf(stderr, "%s: could not create thread %d: %s\n",
					PROGNAME, i, strerror(rc));
			break;
		}
		nstarted++;
	}
	return nstarted;
}

/*
 * Wait until the nstarted threads are ready, then let them go together;
 * or stop them all if "abort" or if any of them could not connect.
 * Returns whether they were stopped.
 */
static bool
open_gate(Shared *shared, const Client *clients, int nstarted, bool abort)
{
	StartGate  *gate = &shared->gate;

	pthread_mutex_lock(&gate->lock);
	while (gate->nready < nstarted)
		pthread_cond_wait(&gate->ready_cond, &gate->lock);
	for (int i = 0; i < nstarted; i++)
	{
		if (!clients[i].connected)
			abort = true;
	}
	gate->abort = abort;
	gate->open = true;
	pthread_cond_broadcast(&gate->open_cond);
	pthread_mutex_unlock(&gate->lock);
	return abort;
}

/*
 * Add up the counters of the n joined clients into "totals" and close their
 * connections.  The first few clients' fatal errors are printed.  Returns
 * whether any client failed.
 */
static bool
sum_clients(Client *clients, int n, Totals *totals)
{
	int			nfailed = 0;

	for (int i = 0; i < n; i++)
	{
		Client	   *cl = &clients[i];

		if (cl->capped)
			totals->capped = true;
		if (cl->failed)
		{
			/* all connections often fail alike: report only the first few */
			if (nfailed++ < MAX_REPORT)
				fprintf(stderr, "%s: connection %d: %s\n", PROGNAME, i, cl->errmsg);
		}
		totals->values += (int64) cl->values.n;
		totals->errors += cl->errors;
		totals->reconnects += cl->reconnects;
		totals->generated += cl->generated;
		totals->commits += cl->commits;
		totals->rollbacks += cl->rollbacks;
		totals->in_doubt += cl->in_doubt;
		totals->order_errors += cl->order_errors;
		PQfinish(cl->conn);
		cl->conn = NULL;
	}
	if (nfailed > MAX_REPORT)
		fprintf(stderr, "%s: ... and %d more connections failed\n",
				PROGNAME, nfailed - MAX_REPORT);
	return nfailed > 0;
}

/*
 * Run the clients: a thread each, started together at the gate, and wait
 * for them all.  Fills in "totals"; returns false if a thread could not be
 * started, a connection failed or a client hit a fatal error (all reported
 * on stderr): then there is nothing to check.
 */
bool
run_clients(const Options *opts, Shared *shared, Client *clients,
			Totals *totals)
{
	pthread_t  *threads = xmalloc(sizeof(pthread_t) * opts->clients);
	int			nstarted = start_threads(opts, clients, threads);
	bool		failed;
	double		t0;

	failed = open_gate(shared, clients, nstarted, nstarted < opts->clients);
	t0 = now_seconds();
	for (int i = 0; i < nstarted; i++)
		pthread_join(threads[i], NULL);
	memset(totals, 0, sizeof(Totals));
	totals->elapsed = now_seconds() - t0;
	free(threads);

	if (sum_clients(clients, nstarted, totals))
		failed = true;
	return !failed;
}

/* free the clients and what they kept, and the shared state */
void
clients_free(const Options *opts, Shared *shared, Client *clients)
{
	for (int i = 0; i < opts->clients; i++)
	{
		free(clients[i].values.data);
		free(clients[i].last_value);
		keytable_free(&clients[i].keytab);
	}
	free(clients);
	pthread_cond_destroy(&shared->gate.open_cond);
	pthread_cond_destroy(&shared->gate.ready_cond);
	pthread_mutex_destroy(&shared->gate.lock);
}
