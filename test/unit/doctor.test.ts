import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { assessEngine, assessRunc, describeRuns } from '../../src/cli/doctor.js';
import { BerthConfigSchema } from '../../src/config/berth-config-schema.js';
import { parseBerthConfig } from '../../src/config/berth-config.js';
import { ProjectMetadataSchema } from '../../src/config/metadata.js';
import { claimBridges } from '../../src/bridges/start.js';
import { checkBridgeConsumers, checkRoutes, checkModels, checkModelUpstreams, checkWebChat } from '../../src/cli/doctor-outbound.js';
import { startFakeAnthropic } from '../fakes/anthropic-api.js';

describe('assessEngine', () => {
  it.each([
    ['Docker 20.10.24+dfsg1', '20.10.24+dfsg1', 'warn'],
    ['Docker 20.10.5', '20.10.5', 'warn'],
    ['Docker 20.10.27', '20.10.27', 'ok'],
    ['Docker 24.0.7', '24.0.7', 'ok'],
    ['Podman Engine 4.3.1', '20.10.0', 'ok'],
  ])('%s: %s', (name, version, status) => {
    const c = assessEngine({ name, version, apiVersion: '1.41' });
    expect(c.status).toBe(status);
    if (status === 'warn') expect(c.detail).toContain('moby/moby#46661');
  });
});

describe('assessRunc', () => {
  it.each([
    ['1.1.5+ds1-1+deb12u1', false, 'warn'],
    ['1.1.5+ds1-1+deb12u1', true, 'fail'],
    ['1.1.5', false, 'fail'],
    ['1.1.11', false, 'fail'],
    ['1.1.12', false, 'warn'],
    ['1.2.7', true, 'fail'],
    ['1.2.8', true, 'ok'],
    ['1.3.2', false, 'warn'],
    ['1.3.3', true, 'ok'],
    ['1.4.0', true, 'ok'],
    ['2.0.0', true, 'ok'],
  ] as const)('runc %s with shared mounts=%s → %s', (version, shared, status) => {
    expect(assessRunc(version, shared ? ['bot'] : []).status).toBe(status);
  });

  it('a failure names the projects it is about and what to do', () => {
    expect(assessRunc('1.1.5+ds1-1+deb12u1', ['bot', 'web']).detail).toContain('projects "bot", "web" (workspace_isolation false)');
    expect(assessRunc('1.1.5+ds1-1+deb12u1', ['bot']).detail).toContain('isolate it (berth project update <name> --isolation)');
  });

  it('names the CVEs it is worried about', () => {
    expect(assessRunc('1.1.5+ds1-1+deb12u1', []).detail).toContain('CVE-2025-31133');
    expect(assessRunc('1.1.5', []).detail).toContain('CVE-2024-21626');
  });
});

describe('describeRuns: what admission and warm containers will do', () => {
  it('names the limits in force and whether sessions stay warm', () => {
    const on = describeRuns(BerthConfigSchema.parse({ runs: { max_concurrent: 4, per_tenant: 1, queue: 12 } }));
    expect(on.detail).toBe(
      '4 at once (4 per project, 1 per tenant), 12 may wait; sessions stay warm 300 s (at most 200) under serve; SIGTERM drains for 30 s',
    );
    expect(describeRuns(BerthConfigSchema.parse({ runs: { warm_idle_seconds: 0 } })).detail).toContain('no warm containers');
  });
});

describe('doctor: what a chat user would otherwise find first', () => {
  const meta = (upstreams: string[]) => ProjectMetadataSchema.parse({ name: 'bot', agent: 'claude', models: { upstreams } });
  const config = (extra: Record<string, unknown> = {}) =>
    BerthConfigSchema.parse({ models: { anthropic: { api: 'anthropic', url: 'https://api.anthropic.com', api_key: 'k' } }, ...extra });

  it('a project allowed a model upstream berth.yaml does not define FAILs, with the ones it has', () => {
    const [check] = checkModels(config(), [{ name: 'bot', metadata: meta(['openai']) }]);
    expect(check).toEqual({ name: 'models bot', status: 'fail', detail: expect.stringContaining("openai not in berth.yaml's models") });
    expect(check!.detail).toContain('--model <one of: anthropic>');
    expect(checkModels(config(), [{ name: 'bot', metadata: meta(['anthropic']) }])[0]!.status).toBe('ok');
  });

  it('a route answered by a project that does not exist, or a workflow it lacks, FAILs; a good one is ok', () => {
    const routes = {
      signal: { project: 'helper' },
      'signal:g1': { project: 'bot', workflow: 'nightly' },
      web: { project: 'bot', workflow: 'triage' },
    };
    const checks = checkRoutes(config({ routes }), new Map([['bot', ['triage']]]));
    expect(checks).toEqual([
      {
        name: 'route signal',
        status: 'fail',
        detail: 'answers with project "helper", which does not exist: its messages fail (berth project create helper, or name one of: bot)',
      },
      { name: 'route signal:g1', status: 'fail', detail: 'runs workflow "nightly", which project "bot" does not have (workflows: triage)' },
      { name: 'route web', status: 'ok', detail: 'answered by project "bot", workflow "triage"' },
    ]);
  });

  it('berth.yaml\'s old key "channels:" is read as routes, with a warning; both keys at once are refused, naming the old one', () => {
    const old = parseBerthConfig('channels:\n  signal: { project: bot }\n', 'berth.yaml', '/nonexistent-home');
    expect(old.routes).toEqual({ signal: { project: 'bot' } });
    expect(checkRoutes(old, new Map([['bot', []]]))).toEqual([
      {
        name: 'routes',
        status: 'warn',
        detail: 'berth.yaml names its routes "channels:", their old name: still read, but rename the key to "routes:"',
      },
      { name: 'route signal', status: 'ok', detail: 'answered by project "bot"' },
    ]);
    const both = () =>
      parseBerthConfig('routes:\n  web: { project: bot }\nchannels:\n  signal: { project: bot }\n', 'berth.yaml', '/nonexistent-home');
    expect(both).toThrow(
      expect.objectContaining({
        code: 'CONFIG_INVALID',
        details: { issues: [{ field: 'channels', reason: 'is the old name of routes: move its entries there' }] },
      }),
    );
    expect(
      checkRoutes(parseBerthConfig('routes:\n  web: { project: bot }\n', 'berth.yaml', '/nonexistent-home'), new Map([['bot', []]])),
    ).toEqual([{ name: 'route web', status: 'ok', detail: 'answered by project "bot"' }]);
  });
});

describe('doctor asks each model upstream one cheap authenticated question', () => {
  it('ok with the key; FAIL for a refused key or an upstream that cannot be reached; WARN for a URL that is not the API base', async () => {
    const fake = await startFakeAnthropic({ apiKey: 'k-right-0123456789' });
    const closed = http.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const gone = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
    await new Promise<void>((r) => closed.close(() => r()));
    try {
      const upstream = (url: string, key: string) => ({ api: 'anthropic', url, api_key: key });
      const config = BerthConfigSchema.parse({
        models: {
          good: upstream(fake.url, 'k-right-0123456789'),
          badkey: upstream(fake.url, 'k-wrong'),
          gone: upstream(gone, 'k'),
          wrongurl: upstream(`${fake.url}/nested`, 'k-right-0123456789'),
        },
      });
      const checks = await checkModelUpstreams(config);
      expect(checks.map((c) => [c.name, c.status])).toEqual([
        ['model good', 'ok'],
        ['model badkey', 'fail'],
        ['model gone', 'fail'],
        ['model wrongurl', 'warn'],
      ]);
      expect(checks[1]!.detail).toBe(`${fake.url} refuses berth.yaml's key (HTTP 401): every model call fails; set models.badkey.api_key`);
      expect(checks[2]!.detail).toBe(`${gone} cannot be reached (ECONNREFUSED): agents' model calls fail; check models.gone.url`);
      expect(JSON.stringify(checks)).not.toContain('k-right'); // never the key
      // The question it asked: the Models API, with the key as berth sends it on a model call.
      expect(
        fake.requests.filter((r) => r.path === '/v1/models').map((r) => [r.method, r.headers['x-api-key'], r.headers['anthropic-version']]),
      ).toEqual([
        ['GET', 'k-right-0123456789', '2023-06-01'],
        ['GET', 'k-wrong', '2023-06-01'],
      ]);
    } finally {
      await fake.close();
    }
  });
});

describe('doctor says whether a live berth answers the Signal bridge', () => {
  it('warns while no running berth consumes it; names the process that does', () => {
    const stateDir = fs.mkdtempSync(join(os.tmpdir(), 'berth-doctor-bridge-'));
    try {
      const config = BerthConfigSchema.parse({ bridges: { signal: { url: 'http://127.0.0.1:8081', account: '+4915550000' } } });
      expect(checkBridgeConsumers(BerthConfigSchema.parse({}), stateDir)).toEqual([]); // no bridge, nothing to say
      expect(checkBridgeConsumers(config, stateDir)).toEqual([
        {
          name: 'bridge signal consumer',
          status: 'warn',
          detail: 'no running berth answers it: messages wait at Signal until "berth serve" (or "berth bridge signal") runs',
        },
      ]);
      const claim = claimBridges({ config: () => config, stateDir });
      expect(checkBridgeConsumers(config, stateDir)).toEqual([
        {
          name: 'bridge signal consumer',
          status: 'ok',
          detail: `berth process ${process.pid} answers it (berth serve or berth bridge signal)`,
        },
      ]);
      claim.release();
      expect(checkBridgeConsumers(config, stateDir)[0]!.status).toBe('warn');
    } finally {
      fs.rmSync(stateDir, { recursive: true, force: true });
    }
  });
});

describe('doctor lists the web chat with the chat bridges', () => {
  it('names where it is served (public_url when set) and how a person logs in; with or without any channel', () => {
    expect(checkWebChat(BerthConfigSchema.parse({}))).toEqual({
      name: 'bridge web',
      status: 'ok',
      detail:
        "berth serve answers it at berth serve's address/chat; a person logs in by a link (berth chat-link <project> --user <name>: tenant web:<name>, answered by that project), up to 20 conversations each",
    });
    const served = BerthConfigSchema.parse({ bridges: { public_url: 'https://berth.example.org/', web: { max_sessions_per_user: 3 } } });
    expect(checkWebChat(served).detail).toMatch(
      /^berth serve answers it at https:\/\/berth\.example\.org\/chat; .* up to 3 conversations each$/,
    );
  });
});
