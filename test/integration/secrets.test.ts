import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueServerCert, makeAuthority, newRsaKey } from '../../src/outbound/certs.js';
import { readOutbound } from '../../src/store/outbound-log.js';
import { startFakeGitHost, type FakeGitHost } from '../fakes/git-https.js';
import { BERTH_BIN, testHome, type TestHome } from '../helpers.js';

/**
 * Brokered secrets end to end, on the real engine: a level-medium container runs the real git,
 * curl and Node against loopback hosts with certificates from a test CA standing in for a public
 * one; the operator gives berth the tokens with `berth secret set` and grants them with `berth
 * secret grant`. The hosts get the tokens; the container holds only placeholders; a revoked
 * grant holds at the next request. The proxy's own cases (masking, rate limits, a host that
 * cannot prove itself) are test/unit/egress-secrets.test.ts.
 */
const GIT_TOKEN = `ghp_${Math.random().toString(36).slice(2)}GITSECRET`;
const API_TOKEN = `sk_${Math.random().toString(36).slice(2)}APISECRET`;
const CLIENTS_IMAGE = 'berth/secret-clients:test';
const b64 = (s: string) => Buffer.from(s).toString('base64');

let git: FakeGitHost;
let api: https.Server;
let apiPort: number;
const apiSeen: Array<{ url: string; authorization?: string }> = [];
let h: TestHome;
let files: string;

/** The operator's CLI on this home; `input` goes to its stdin. */
function berth(args: string[], input = ''): { code: number; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BERTH_BIN, '--home', h.home, ...args], {
    encoding: 'utf8',
    input,
    env: { PATH: process.env.PATH ?? '' },
  });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

beforeAll(async () => {
  // berth's agent image plus Node (the one berth runs on), for Node's own fetch.
  execFileSync('docker', ['build', '-q', '-t', CLIENTS_IMAGE, '-'], {
    input: 'FROM berth/node-base:local AS node\nFROM berth/agent:latest\nCOPY --from=node /usr/local/bin/node /usr/local/bin/node\n',
    stdio: ['pipe', 'ignore', 'inherit'],
  });
  git = await startFakeGitHost({ token: GIT_TOKEN });
  git.createRepo('demo');
  const apiCa = makeAuthority('test public CA 2');
  const key = newRsaKey();
  api = https.createServer(
    { key: key.export({ type: 'pkcs8', format: 'pem' }), cert: issueServerCert(apiCa, 'localhost', key) },
    (req, res) => {
      apiSeen.push({ url: req.url ?? '', authorization: req.headers.authorization });
      req.resume();
      if (req.headers.authorization !== `Bearer ${API_TOKEN}`) {
        res.writeHead(401, { 'content-type': 'text/plain' }).end('who are you?\n');
        return;
      }
      // A host that writes the header back in another form: base64 in the body, percent-encoded in a redirect.
      if (req.url === '/v1/echo-b64')
        return void res.writeHead(200, { 'content-type': 'text/plain' }).end(`${b64(String(req.headers.authorization))}\n`);
      if (req.url === '/v1/echo-location')
        return void res
          .writeHead(302, { location: `https://elsewhere.example/cb?t=${encodeURIComponent(String(req.headers.authorization))}` })
          .end();
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ hello: 'agent', path: req.url }));
    },
  );
  await new Promise<void>((r) => api.listen(0, '127.0.0.1', r));
  apiPort = (api.address() as AddressInfo).port;
  h = testHome({ warm: true, pool: 'always' });
  files = join(h.home, 'operator-files');
  fs.mkdirSync(files, { mode: 0o700 });
  fs.writeFileSync(join(files, 'git-ca.pem'), git.caPem);
  fs.writeFileSync(join(files, 'api-ca.pem'), apiCa.certPem);
  fs.writeFileSync(join(files, 'gh-token'), `${GIT_TOKEN}\n`, { mode: 0o600 });
  fs.writeFileSync(
    join(h.home, 'berth.yaml'),
    [
      'egress:',
      `  private_hosts: ['localhost:${git.port}', 'localhost:${apiPort}']`,
      `  trust_ca_files: ['${files}/git-ca.pem', '${files}/api-ca.pem']`,
      '',
    ].join('\n'),
  );
  h.create({ name: 'dev', agent: 'shell', image: CLIENTS_IMAGE, workspace_isolation: true });
  // The operator's commands, as docs/secrets.md gives them.
  for (const args of [
    ['secret', 'set', 'GH_TOKEN', '--from-file', join(files, 'gh-token')],
    ['secret', 'grant', 'GH_TOKEN', '--project', 'dev', '--host', `localhost:${git.port}`, '--basic-user', 'x-access-token'],
    ['secret', 'set', 'API_TOKEN', '--stdin'],
    ['secret', 'grant', 'API_TOKEN', '--project', 'dev', '--host', `localhost:${apiPort}`, '--path-prefix', '/v1/'],
  ]) {
    const r = berth(args, args.includes('--stdin') ? `${API_TOKEN}\n` : '');
    expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(0);
  }
}, 300_000);

afterAll(async () => {
  await h?.[Symbol.asyncDispose]();
  await git?.close();
  api?.close();
});

// The clients reach "localhost" hosts through the proxy (berth's NO_PROXY keeps the container's own loopback out of it).
const VIA_PROXY = 'export NO_PROXY=127.0.0.1 no_proxy=127.0.0.1';

describe('brokered secrets: the agent uses tokens it never holds', () => {
  it('real git clones and pushes over HTTPS with the token berth adds', async () => {
    const o = await h.run(
      'dev',
      'sig:+1',
      [
        VIA_PROXY,
        'cd /tmp',
        `git clone -q https://localhost:${git.port}/demo.git`,
        'cd demo',
        'echo "from the agent" > agent.txt',
        'git add agent.txt',
        'git -c user.name=agent -c user.email=agent@example.test commit -qm "pushed by the agent"',
        'git push -q origin main',
        'echo "token in env: ${GH_TOKEN}"',
      ].join(' && '),
      'medium',
    );
    expect(o.exitCode, o.stderr + o.stdout).toBe(0);
    expect(o.stdout).toContain('token in env: berth-placeholder-GH_TOKEN');
    expect(git.log('demo')[0]).toBe('pushed by the agent');
    const pushed = git.requests.filter((r) => r.path.includes('git-receive-pack'));
    expect(pushed.length).toBeGreaterThan(0);
    expect(git.requests.every((r) => r.authorization === `Basic ${b64(`x-access-token:${GIT_TOKEN}`)}`)).toBe(true);
    // Each request that carried it is in the project's outbound log, by name.
    const log = readOutbound(join(h.home, 'projects', 'dev', 'sessions'), { limit: 100 }).filter(
      (r) => r.kind === 'egress' && r.secret === 'GH_TOKEN',
    );
    expect(
      log.some((r) => r.kind === 'egress' && r.method === 'POST' && r.path === '/demo.git/git-receive-pack' && r.tenant === 'sig:+1'),
    ).toBe(true);
  }, 120_000);

  it("curl and Node's fetch call an API that demands a bearer token; outside the grant they get a clear refusal", async () => {
    const o = await h.run(
      'dev',
      'sig:+1',
      [
        VIA_PROXY,
        `curl -sS https://localhost:${apiPort}/v1/me`,
        'echo',
        `node -e "fetch('https://localhost:${apiPort}/v1/node').then(r => r.text()).then(t => console.log('node:', t))"`,
        // The placeholder toward a path the grant does not cover: refused, nothing sent.
        `curl -sS -H "Authorization: Bearer $API_TOKEN" https://localhost:${apiPort}/admin/delete-everything`,
        // A client that trusts only its own CA (a pinned one) fails the handshake, plainly.
        `curl -sS --cacert /usr/share/ca-certificates/mozilla/ISRG_Root_X1.crt https://localhost:${apiPort}/v1/pinned || echo "pinned client: exit $?"`,
      ].join('; '),
      'medium',
    );
    expect(o.stdout).toContain('{"hello":"agent","path":"/v1/me"}');
    expect(o.stdout).toContain('node: {"hello":"agent","path":"/v1/node"}');
    expect(o.stdout).toMatch(
      /berth: the request carries the placeholder of secret API_TOKEN, which project "dev" is not granted for GET https:\/\/localhost:\d+\/admin\/delete-everything/,
    );
    expect(o.stdout + o.stderr).toMatch(/pinned client: exit 60/);
    expect(apiSeen.map((s) => s.url)).toEqual(['/v1/me', '/v1/node']);
    expect(apiSeen.every((s) => s.authorization === `Bearer ${API_TOKEN}`)).toBe(true);
    const audit = h.berth.audit.list({ limit: 50 }).filter((e) => e.action === 'secret.use');
    expect(audit[0]).toMatchObject({ kind: 'permission_denied', actor: 'tenant:sig:+1', project: 'dev', outcome: 'refused' });
    expect(audit[0]?.target).toContain('API_TOKEN');
    const tls = readOutbound(join(h.home, 'projects', 'dev', 'sessions'), { limit: 100 }).find(
      (r) => r.kind === 'egress' && r.method === 'TLS',
    );
    expect(tls?.reason).toMatch(/does not trust berth's CA/);
  }, 120_000);

  it('a host that writes the token back in base64 or percent-encoded hands nothing back; a request asking for another method gets no token', async () => {
    const before = apiSeen.length;
    const o = await h.run(
      'dev',
      'sig:+1',
      [
        VIA_PROXY,
        `curl -sS https://localhost:${apiPort}/v1/echo-b64`,
        `curl -sS -o /dev/null -D - https://localhost:${apiPort}/v1/echo-location`,
        `curl -sS -X POST "https://localhost:${apiPort}/v1/items?%5Fmethod=DELETE"`,
      ].join('; '),
      'medium',
    );
    const seen = apiSeen.slice(before);
    // The host got the token on the first two, and wrote it back ...
    expect(seen.slice(0, 2).map((s) => s.authorization)).toEqual([`Bearer ${API_TOKEN}`, `Bearer ${API_TOKEN}`]);
    // ... which the container does not see, in any of its forms.
    for (const form of [API_TOKEN, b64(API_TOKEN).slice(4, -4), b64(`Bearer ${API_TOKEN}`).slice(12, -4), encodeURIComponent(API_TOKEN)])
      expect(o.stdout).not.toContain(form);
    expect(o.stdout).toMatch(/location: https:\/\/elsewhere\.example\/cb\?t=Bearer%20\*+/i);
    // "%5Fmethod" is "_method" to a server: the grant (limited to /v1/) does not cover it.
    expect(seen[2]).toEqual({ url: '/v1/items?%5Fmethod=DELETE', authorization: undefined });
    expect(o.stdout).toContain('who are you?');
  }, 120_000);

  it('the tokens are nowhere in the container: environment, processes, files, the agent home', async () => {
    const hunt = [
      `printf '%s\\n%s\\n' "$(echo ${b64(GIT_TOKEN)} | base64 -d)" "$(echo ${b64(API_TOKEN)} | base64 -d)" > /tmp/k.pat`,
      'env; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr "\\0" "\\n"; ls -la /run/berth',
      'echo "--- files holding a token:"',
      'grep -rlsF -f /tmp/k.pat /etc /usr/local /run /home /workspace /tmp "$HOME" 2>/dev/null',
      'echo "--- end"',
    ].join('; ');
    const o = await h.run('dev', 'sig:+1', hunt, 'medium');
    expect(o.stdout).not.toContain(GIT_TOKEN);
    expect(o.stdout).not.toContain(API_TOKEN);
    expect(o.stdout).toContain('GH_TOKEN=berth-placeholder-GH_TOKEN');
    expect(o.stdout).toContain('API_TOKEN=berth-placeholder-API_TOKEN');
    expect(o.stdout).toContain('SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt');
    expect(o.stdout).toContain('NODE_EXTRA_CA_CERTS=/usr/local/share/ca-certificates/berth-egress-ca.crt');
    expect(o.stdout.split('--- files holding a token:\n')[1]).toBe('/tmp/k.pat\n--- end\n');
    // At level low there is no proxy and no placeholder at all.
    const low = await h.run(
      'dev',
      'sig:+2',
      'echo "gh=${GH_TOKEN:-none}"; grep -c "BEGIN CERT" /etc/ssl/certs/ca-certificates.crt; ls /usr/local/share/ca-certificates',
      'low',
    );
    expect(low.stdout).toContain('gh=none');
    expect(low.stdout).not.toContain('berth-egress-ca.crt');
  }, 120_000);

  it('a revoked grant holds at the next request: the host is out of reach again', async () => {
    const r = berth(['secret', 'revoke', 'GH_TOKEN', '--project', 'dev']);
    expect(r.code, r.stderr).toBe(0);
    const before = git.requests.length;
    const o = await h.run(
      'dev',
      'sig:+1',
      `${VIA_PROXY}; git ls-remote https://localhost:${git.port}/demo.git 2>&1; echo "exit $?"`,
      'medium',
    );
    expect(o.stdout).toMatch(/exit 128/);
    expect(o.stdout).toMatch(/403/);
    expect(git.requests.length).toBe(before);
  }, 120_000);
});
