import { describe, expect, it } from 'vitest';
import { assessRunc, describeRuns } from '../../src/doctor.js';
import { BerthConfigSchema } from '../../src/config/berth-config-schema.js';
import { ProjectMetadataSchema } from '../../src/config/metadata.js';
import { checkChannels, checkModels } from '../../src/doctor-outbound.js';

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
    expect(on.detail).toBe('4 at once (4 per project, 1 per tenant), 12 may wait; sessions stay warm 300 s (at most 200) under serve; SIGTERM drains for 30 s');
    expect(describeRuns(BerthConfigSchema.parse({ runs: { warm_idle_seconds: 0 } })).detail).toContain('no warm containers');
  });
});

describe('doctor: what a chat user would otherwise find first', () => {
  const meta = (upstreams: string[]) => ProjectMetadataSchema.parse({ name: 'bot', agent: 'claude', models: { upstreams } });
  const config = (extra: Record<string, unknown> = {}) =>
    BerthConfigSchema.parse({ models: { anthropic: { api: 'anthropic', url: 'https://api.anthropic.com', api_key: 'k' } }, ...extra });

  it('a project allowed a model upstream berth.yaml does not define FAILs, with the ones it has', () => {
    const [check] = checkModels(config(), [{ name: 'bot', metadata: meta(['openai']) }]);
    expect(check).toEqual({ name: 'models bot', status: 'fail', detail: expect.stringContaining('openai not in berth.yaml\'s models') });
    expect(check!.detail).toContain('--model <one of: anthropic>');
    expect(checkModels(config(), [{ name: 'bot', metadata: meta(['anthropic']) }])[0]!.status).toBe('ok');
  });

  it('a channel answered by a project that does not exist, or a workflow it lacks, FAILs; a good one is ok', () => {
    const channels = { signal: { project: 'helper' }, 'signal:g1': { project: 'bot', workflow: 'nightly' }, web: { project: 'bot', workflow: 'triage' } };
    const checks = checkChannels(config({ channels }), new Map([['bot', ['triage']]]));
    expect(checks).toEqual([
      { name: 'channel signal', status: 'fail', detail: 'answers with project "helper", which does not exist: its messages fail (berth project create helper, or name one of: bot)' },
      { name: 'channel signal:g1', status: 'fail', detail: 'runs workflow "nightly", which project "bot" does not have (workflows: triage)' },
      { name: 'channel web', status: 'ok', detail: 'answered by project "bot", workflow "triage"' },
    ]);
  });
});
