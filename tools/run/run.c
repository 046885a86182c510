/*
 * spindle-run: starts N local copies of a program as one group, the way a
 * cluster launcher would (docs/CONFIG.md "From a launcher").
 *
 *   spindle-run -n N [--base-port P] [--] PROGRAM [ARGS...]
 *
 * Each copy gets SPINDLE_RANK (0..N-1), SPINDLE_SIZE (N),
 * SPINDLE_LOCAL_RANK (its rank: every copy runs here) and
 * SPINDLE_BASE_PORT, so spindle_group_setup_from_env finds its group; its
 * standard input is /dev/null and every line it writes to standard output
 * or error comes out on the same stream prefixed "[rank] ". SIGINT,
 * SIGTERM and SIGHUP are forwarded to every copy still running (each runs
 * in its own process group, so a terminal's ^C reaches it once, through
 * here). When all have ended, one line per rank on standard error says
 * how it ended; the exit status is 0 when every copy exited 0, 1 when any
 * did not, 2 for a bad command line or when the copies could not be
 * started.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spindle/setup.h> /* SPINDLE_SETUP_DEFAULT_BASE_PORT */
#include <spindle/view.h>  /* SPINDLE_MAX_MEMBERS */

/* A line longer than this is cut into pieces, each prefixed. */
#define RUN_LINE_MAX 4096

struct run_stream {
    int fd;     /* read end of the child's pipe; -1 at EOF */
    int out_fd; /* 1 or 2 */
    size_t used;
    char line[RUN_LINE_MAX];
};

struct run_child {
    pid_t pid; /* 0 once reaped */
    int status;
    struct run_stream streams[2]; /* stdout, stderr */
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: spindle-run -n N [--base-port P] [--] PROGRAM [ARGS...]\n"
            "  -n, --members N     copies to start, 1..%u\n"
            "  --base-port P       SPINDLE_BASE_PORT of every copy (default %u); rank r\n"
            "                      listens on P + r\n",
            SPINDLE_MAX_MEMBERS, SPINDLE_SETUP_DEFAULT_BASE_PORT);
}

static int parse_number(const char *flag, const char *text, unsigned long low, unsigned long high,
                        unsigned long *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long value = strtoul(text, &end, 10);
    if (text[0] < '0' || text[0] > '9' || *end != '\0' || errno != 0 || value < low ||
        value > high) {
        fprintf(stderr, "spindle-run: %s %s: must be a number %lu..%lu\n", flag, text, low, high);
        return -1;
    }
    *out = value;
    return 0;
}

static void write_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return; /* a closed stdout: the output is dropped, the copies go on */
        data += n;
        len -= (size_t)n;
    }
}

/* Writes "[rank] " + text + "\n" in one write, so lines do not mix. */
static void emit_line(int out_fd, unsigned rank, const char *text, size_t len)
{
    char buffer[RUN_LINE_MAX + 32];
    int prefix = snprintf(buffer, sizeof buffer, "[%u] ", rank);
    memcpy(buffer + prefix, text, len);
    buffer[(size_t)prefix + len] = '\n';
    write_all(out_fd, buffer, (size_t)prefix + len + 1);
}

/* Reads what the pipe has; emits every complete line (and the rest at EOF). */
static void drain(struct run_stream *s, unsigned rank)
{
    ssize_t n;
    do {
        n = read(s->fd, s->line + s->used, sizeof s->line - s->used);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && errno == EAGAIN)
        return;
    if (n <= 0) {
        if (s->used > 0)
            emit_line(s->out_fd, rank, s->line, s->used);
        s->used = 0;
        close(s->fd);
        s->fd = -1;
        return;
    }
    s->used += (size_t)n;
    size_t start = 0;
    for (size_t i = 0; i < s->used; i++)
        if (s->line[i] == '\n') {
            emit_line(s->out_fd, rank, s->line + start, i - start);
            start = i + 1;
        }
    if (start == 0 && s->used == sizeof s->line) { /* no newline in a full buffer */
        emit_line(s->out_fd, rank, s->line, s->used);
        start = s->used;
    }
    memmove(s->line, s->line + start, s->used - start);
    s->used -= start;
}

/* In the child: the environment, the pipes, then the program. */
static void exec_child(unsigned rank, unsigned size, unsigned base_port, const int pipes[2][2],
                       char **argv, const sigset_t *old_mask, pid_t parent)
{
    char text[16];
    snprintf(text, sizeof text, "%u", rank);
    setenv("SPINDLE_RANK", text, 1);
    setenv("SPINDLE_LOCAL_RANK", text, 1);
    snprintf(text, sizeof text, "%u", size);
    setenv("SPINDLE_SIZE", text, 1);
    snprintf(text, sizeof text, "%u", base_port);
    setenv("SPINDLE_BASE_PORT", text, 1);
    unsetenv("SPINDLE_HOSTFILE"); /* every copy runs here */
    setpgid(0, 0);
    /* A copy does not outlive spindle-run, even when it is killed. */
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
        _exit(127);
    int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(pipes[0][1], 1) < 0 || dup2(pipes[1][1], 2) < 0)
        _exit(127);
    signal(SIGPIPE, SIG_DFL); /* an ignored signal would stay ignored in the program */
    sigprocmask(SIG_SETMASK, old_mask, NULL);
    execvp(argv[0], argv);
    fprintf(stderr, "spindle-run: %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

static int start_child(struct run_child *child, unsigned rank, unsigned size, unsigned base_port,
                       char **argv, const sigset_t *old_mask)
{
    int pipes[2][2];
    if (pipe2(pipes[0], O_CLOEXEC) != 0)
        return -1;
    if (pipe2(pipes[1], O_CLOEXEC) != 0) {
        close(pipes[0][0]);
        close(pipes[0][1]);
        return -1;
    }
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0)
        exec_child(rank, size, base_port, pipes, argv, old_mask, parent);
    for (int s = 0; s < 2; s++) {
        close(pipes[s][1]);
        if (pid < 0) {
            close(pipes[s][0]);
            continue;
        }
        fcntl(pipes[s][0], F_SETFL, O_NONBLOCK);
        child->streams[s].fd = pipes[s][0];
        child->streams[s].out_fd = s + 1;
    }
    if (pid < 0)
        return -1;
    child->pid = pid;
    return 0;
}

static unsigned reap(struct run_child *children, unsigned n)
{
    unsigned reaped = 0;
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
        for (unsigned i = 0; i < n; i++)
            if (children[i].pid == pid) {
                children[i].pid = 0;
                children[i].status = status;
                reaped++;
            }
    return reaped;
}

/* Output and signals until every copy has ended. */
static void supervise(struct run_child *children, unsigned n, int signal_fd, unsigned running)
{
    struct pollfd fds[2 * SPINDLE_MAX_MEMBERS + 1];
    while (running > 0) {
        nfds_t count = 0;
        fds[count++] = (struct pollfd){.fd = signal_fd, .events = POLLIN};
        for (unsigned i = 0; i < n; i++)
            for (int s = 0; s < 2; s++)
                fds[count++] = (struct pollfd){.fd = children[i].streams[s].fd, .events = POLLIN};
        if (poll(fds, count, -1) < 0 && errno != EINTR)
            break;
        struct signalfd_siginfo info;
        while (read(signal_fd, &info, sizeof info) == (ssize_t)sizeof info)
            if (info.ssi_signo == SIGCHLD)
                running -= reap(children, n);
            else
                for (unsigned i = 0; i < n; i++)
                    if (children[i].pid > 0)
                        kill(children[i].pid, (int)info.ssi_signo);
        for (nfds_t f = 1; f < count; f++)
            if (fds[f].revents != 0)
                drain(&children[(f - 1) / 2].streams[(f - 1) % 2], (unsigned)(f - 1) / 2);
    }
    /* What the copies wrote before they ended is in the pipes now; a
     * process they left behind may hold a pipe open, so read only that. */
    for (unsigned i = 0; i < n; i++)
        for (int s = 0; s < 2; s++) {
            struct run_stream *stream = &children[i].streams[s];
            while (stream->fd >= 0) {
                struct pollfd one = {.fd = stream->fd, .events = POLLIN};
                if (poll(&one, 1, 0) <= 0) {
                    if (stream->used > 0)
                        emit_line(stream->out_fd, i, stream->line, stream->used);
                    close(stream->fd);
                    stream->fd = -1;
                } else {
                    drain(stream, i);
                }
            }
        }
}

/* One line per rank; 0 when every copy exited 0. */
static int report(const struct run_child *children, unsigned n)
{
    int rc = 0;
    for (unsigned i = 0; i < n; i++) {
        int status = children[i].status;
        if (WIFEXITED(status)) {
            fprintf(stderr, "spindle-run: rank %u: exit %d\n", i, WEXITSTATUS(status));
            rc |= WEXITSTATUS(status) != 0;
        } else if (WIFSIGNALED(status)) {
            fprintf(stderr, "spindle-run: rank %u: signal %d (%s)\n", i, WTERMSIG(status),
                    strsignal(WTERMSIG(status)));
            rc = 1;
        }
    }
    return rc;
}

int main(int argc, char **argv)
{
    static const struct option options[] = {
        {"members", required_argument, 0, 'n'},
        {"base-port", required_argument, 0, 'p'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    unsigned long n = 0, base_port = SPINDLE_SETUP_DEFAULT_BASE_PORT;
    int opt;
    /* '+': options end at PROGRAM, whose own flags stay its own. */
    while ((opt = getopt_long(argc, argv, "+n:h", options, NULL)) != -1) {
        if (opt == 'h') {
            usage(stdout);
            return 0;
        }
        if (opt == 'n' && parse_number("-n", optarg, 1, SPINDLE_MAX_MEMBERS, &n) != 0)
            return 2;
        if (opt == 'p' && parse_number("--base-port", optarg, 1, 65535, &base_port) != 0)
            return 2;
        if (opt == '?') {
            usage(stderr);
            return 2;
        }
    }
    if (n == 0 || optind >= argc) {
        fprintf(stderr, "spindle-run: %s\n", n == 0 ? "give -n N" : "give the PROGRAM to run");
        usage(stderr);
        return 2;
    }
    if (base_port + n - 1 > 65535) {
        fprintf(stderr, "spindle-run: --base-port %lu: rank %lu would need port %lu, above 65535\n",
                base_port, n - 1, base_port + n - 1);
        return 2;
    }
    sigset_t mask, old_mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, &old_mask);
    signal(SIGPIPE, SIG_IGN);
    int signal_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    struct run_child children[SPINDLE_MAX_MEMBERS];
    memset(children, 0, sizeof children);
    unsigned started = 0;
    for (; signal_fd >= 0 && started < n; started++)
        if (start_child(&children[started], started, (unsigned)n, (unsigned)base_port,
                        argv + optind, &old_mask) != 0)
            break;
    if (started < n) {
        fprintf(stderr, "spindle-run: starting rank %u: %s\n", started, strerror(errno));
        for (unsigned i = 0; i < started; i++)
            kill(children[i].pid, SIGTERM);
    }
    supervise(children, started, signal_fd, started);
    int rc = report(children, started);
    return started < n ? 2 : rc;
}
