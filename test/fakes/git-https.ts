/**
 * A fake "public" git host (think github.com over HTTPS), for tests that push and pull through
 * berth's egress path. It speaks the real Git smart-HTTP protocol by handing every authorized
 * request to git's own `git http-backend` as a CGI (found at `$(git --exec-path)/git-http-backend`),
 * so the real `git` client (and anything else) sees exactly what a real smart-HTTP server sends:
 * info/refs advertisements, upload-pack and receive-pack, protocol v0 and v2 (`Git-Protocol`
 * header passed through as GIT_PROTOCOL), chunked and gzip-encoded request bodies (git gzips
 * large upload-pack POSTs; `HTTP_CONTENT_ENCODING` is passed through and http-backend inflates
 * the body itself).
 *
 * TLS: node:https on 127.0.0.1 (port 0), with a certificate for `localhost` signed by a fresh
 * test CA (`caPem`), so clients use `https://localhost:PORT` and trust `caPem` as if it were a
 * public root.
 *
 * How it differs from a real host:
 * - One credential: every request must carry `opts.token`, as `Authorization: Bearer <token>`,
 *   `Authorization: token <token>`, or Basic auth whose password is the token (any user name, or
 *   exactly `opts.user` when given). Anything else → 401 `WWW-Authenticate: Basic realm="fake-git"`
 *   (even for reads: there are no public repositories). No accounts, no per-repo permissions:
 *   the token may read and push every repo.
 * - Repos exist only when the test makes them (`createRepo`), as bare repos `<name>.git` under a
 *   temporary project root; no API, no redirects, no LFS, no dumb-HTTP niceties beyond what
 *   http-backend itself does (GIT_HTTP_EXPORT_ALL=1, http.receivepack=true).
 * - Bounds: each CGI run is killed after 60 s; its stderr is kept up to 8 KiB and logged with
 *   console.error when it exits non-zero.
 *
 * `requests` records every request in arrival order (method, path with query, the raw
 * Authorization header, the Content-Encoding of its body, and the status answered, 0 until known).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { issueServerCert, makeAuthority, newRsaKey } from '../../src/outbound/certs.js';

export interface FakeGitRequest {
  method: string;
  path: string;
  authorization?: string;
  /** The request body's Content-Encoding (e.g. "gzip"), when it had one. */
  contentEncoding?: string;
  status: number;
}

export interface FakeGitHost {
  /** e.g. https://localhost:PORT (host name "localhost", listening on 127.0.0.1). */
  url: string;
  port: number;
  /** The "public" test CA that signed the server's certificate. */
  caPem: string;
  /** Every request seen, in order. */
  requests: FakeGitRequest[];
  /** Makes a bare repo `<name>.git` with one commit on main (a README); returns its absolute dir. */
  createRepo(name: string): string;
  /** `git log --format=%s main` of that bare repo (subjects, newest first). */
  log(name: string): string[];
  close(): Promise<void>;
}

const CGI_TIMEOUT_MS = 60_000;
const STDERR_LIMIT = 8 * 1024;
const HEADER_LIMIT = 64 * 1024;
const GIT_IDENT = ['-c', 'user.name=fake', '-c', 'user.email=fake@example.test'];

function gitBackendPath(): string {
  const execPath = execFileSync('git', ['--exec-path'], { encoding: 'utf8' }).trim();
  return path.join(execPath, 'git-http-backend');
}

/** The credentials of a request, if they carry the token: the user name to report, else null. */
function authorizedUser(header: string | undefined, token: string, user: string | undefined): string | null {
  if (!header) return null;
  const m = /^(\S+)\s+(.*)$/.exec(header.trim());
  if (!m) return null;
  const scheme = (m[1] as string).toLowerCase();
  const value = (m[2] as string).trim();
  if (scheme === 'bearer' || scheme === 'token') return value === token ? (user ?? 'token') : null;
  if (scheme !== 'basic') return null;
  const decoded = Buffer.from(value, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return null;
  const name = decoded.slice(0, colon);
  const password = decoded.slice(colon + 1);
  if (password !== token) return null;
  if (user !== undefined && name !== user) return null;
  return name || 'token';
}

function checkName(name: string): void {
  if (!/^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/.test(name) || name.split('/').some((p) => p === '.' || p === '..')) {
    throw new Error(`fake git host: bad repo name ${JSON.stringify(name)}`);
  }
}

/** Where the CGI's header block ends in `buf`: [end of headers, start of body], or null. */
function headerEnd(buf: Buffer): [number, number] | null {
  const crlf = buf.indexOf('\r\n\r\n');
  const lf = buf.indexOf('\n\n');
  if (crlf >= 0 && (lf < 0 || crlf <= lf)) return [crlf, crlf + 4];
  if (lf >= 0) return [lf, lf + 2];
  return null;
}

export async function startFakeGitHost(opts: { token: string; user?: string }): Promise<FakeGitHost> {
  const backend = gitBackendPath();
  const root = mkdtempSync(path.join(os.tmpdir(), 'berth-fake-git-'));
  const projectRoot = path.join(root, 'repos');
  const home = path.join(root, 'home');
  mkdirSync(projectRoot);
  mkdirSync(home);
  // The git commands the fake runs itself: no user or system config, no inherited GIT_DIR etc.
  const gitEnv: NodeJS.ProcessEnv = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, GIT_CONFIG_NOSYSTEM: '1' };

  const ca = makeAuthority('Fake Public Git Root CA');
  const key = newRsaKey();
  const certPem = issueServerCert(ca, 'localhost', key);
  const requests: FakeGitRequest[] = [];
  const children = new Set<ChildProcess>();

  function git(args: string[], cwd?: string): string {
    return execFileSync('git', args, { cwd, env: gitEnv, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  }

  function repoDir(name: string): string {
    checkName(name);
    return path.join(projectRoot, `${name}.git`);
  }

  function createRepo(name: string): string {
    const dir = repoDir(name);
    mkdirSync(path.dirname(dir), { recursive: true });
    git(['init', '--quiet', '--bare', '--initial-branch=main', dir]);
    git(['--git-dir', dir, 'config', 'http.receivepack', 'true']);
    const work = mkdtempSync(path.join(root, 'work-'));
    try {
      git(['init', '--quiet', '--initial-branch=main', work]);
      writeFileSync(path.join(work, 'README.md'), `# ${name}\n\nA repository on the fake git host.\n`);
      git(['-C', work, 'add', 'README.md']);
      git(['-C', work, ...GIT_IDENT, 'commit', '--quiet', '-m', 'Initial commit']);
      git(['-C', work, 'push', '--quiet', dir, 'main:main']);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
    return dir;
  }

  function log(name: string): string[] {
    const out = git(['--git-dir', repoDir(name), 'log', '--format=%s', 'main']);
    return out.split('\n').filter((l) => l !== '');
  }

  function handle(req: IncomingMessage, res: ServerResponse): void {
    const url = req.url ?? '/';
    const header = req.headers.authorization;
    const encoding = req.headers['content-encoding'];
    const record: FakeGitRequest = { method: req.method ?? 'GET', path: url, status: 0 };
    if (header !== undefined) record.authorization = header;
    if (encoding !== undefined) record.contentEncoding = encoding;
    requests.push(record);

    const user = authorizedUser(header, opts.token, opts.user);
    if (user === null) {
      record.status = 401;
      req.resume();
      res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="fake-git"', 'Content-Type': 'text/plain; charset=utf-8' });
      res.end('Authentication required\n');
      return;
    }

    const q = url.indexOf('?');
    let pathInfo: string;
    try {
      pathInfo = decodeURIComponent(q < 0 ? url : url.slice(0, q));
    } catch {
      record.status = 400;
      req.resume();
      res.writeHead(400, { 'Content-Type': 'text/plain; charset=utf-8' });
      res.end('Bad path\n');
      return;
    }
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: home,
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_PROJECT_ROOT: projectRoot,
      GIT_HTTP_EXPORT_ALL: '1',
      GATEWAY_INTERFACE: 'CGI/1.1',
      SERVER_PROTOCOL: `HTTP/${req.httpVersion}`,
      PATH_INFO: pathInfo,
      REQUEST_METHOD: req.method ?? 'GET',
      QUERY_STRING: q < 0 ? '' : url.slice(q + 1),
      REMOTE_USER: user,
      REMOTE_ADDR: req.socket.remoteAddress ?? '127.0.0.1',
    };
    if (req.headers['content-type'] !== undefined) env.CONTENT_TYPE = req.headers['content-type'];
    if (req.headers['content-length'] !== undefined) env.CONTENT_LENGTH = req.headers['content-length'];
    if (encoding !== undefined) env.HTTP_CONTENT_ENCODING = encoding;
    const protocol = req.headers['git-protocol'];
    if (typeof protocol === 'string') env.GIT_PROTOCOL = protocol;

    const child = spawn(backend, [], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    children.add(child);
    let stderr = '';
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, CGI_TIMEOUT_MS);

    const fail = (status: number, text: string): void => {
      if (!res.headersSent) {
        record.status = status;
        res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8' });
        res.end(text);
      } else {
        res.destroy();
      }
    };

    child.stderr.on('data', (d: Buffer) => {
      if (stderr.length < STDERR_LIMIT) stderr += d.toString('utf8').slice(0, STDERR_LIMIT - stderr.length);
    });
    // The client may go away mid-body, or the CGI may stop reading (an early error answer).
    child.stdin.on('error', () => {});
    req.on('error', () => child.kill('SIGKILL'));
    res.on('close', () => {
      if (!res.writableFinished) child.kill('SIGKILL');
    });
    req.pipe(child.stdin);

    const send = (chunk: Buffer): void => {
      if (!res.write(chunk)) {
        child.stdout.pause();
        res.once('drain', () => child.stdout.resume());
      }
    };
    let head: Buffer | null = Buffer.alloc(0);
    child.stdout.on('data', (chunk: Buffer) => {
      if (head === null) {
        send(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const end = headerEnd(head);
      if (!end) {
        if (head.length > HEADER_LIMIT) {
          head = null;
          child.kill('SIGKILL');
          fail(502, 'CGI header block too large\n');
        }
        return;
      }
      let status = 200;
      const headers: Record<string, string | string[]> = {};
      for (const line of head.subarray(0, end[0]).toString('latin1').split(/\r?\n/)) {
        const colon = line.indexOf(':');
        if (colon <= 0) continue;
        const name = line.slice(0, colon).trim();
        const value = line.slice(colon + 1).trim();
        if (name.toLowerCase() === 'status') {
          const code = Number.parseInt(value, 10);
          if (code >= 100 && code <= 599) status = code;
          continue;
        }
        const prev = headers[name];
        headers[name] = prev === undefined ? value : Array.isArray(prev) ? [...prev, value] : [prev, value];
      }
      const rest = head.subarray(end[1]);
      head = null;
      record.status = status;
      res.writeHead(status, headers);
      if (rest.length > 0) send(rest);
    });

    child.on('error', (err) => {
      clearTimeout(timer);
      children.delete(child);
      console.error(`fake git host: cannot run ${backend}: ${err.message}`);
      fail(502, 'cannot run git http-backend\n');
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      children.delete(child);
      if (code !== 0) {
        const why = timedOut ? `killed after ${CGI_TIMEOUT_MS} ms` : signal ? `killed by ${signal}` : `exit ${code}`;
        console.error(`fake git host: git http-backend ${record.method} ${url}: ${why}${stderr ? `\n${stderr}` : ''}`);
      }
      if (head !== null) {
        // Never finished its header block.
        head = null;
        fail(timedOut ? 504 : 502, 'git http-backend gave no answer\n');
      } else if (code === 0) {
        res.end();
      } else {
        res.destroy();
      }
    });
  }

  const server = https.createServer({ key: key.export({ type: 'pkcs8', format: 'pem' }), cert: certPem }, handle);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;

  return {
    url: `https://localhost:${port}`,
    port,
    caPem: ca.certPem,
    requests,
    createRepo,
    log,
    async close(): Promise<void> {
      for (const c of children) c.kill('SIGKILL');
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(root, { recursive: true, force: true });
    },
  };
}
