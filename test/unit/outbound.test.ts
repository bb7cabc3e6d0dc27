import { describe, expect, it } from 'vitest';
import { BerthConfigSchema } from '../../src/config/berth-config-schema.js';
import { HostPatternSchema, hostAllowed, modelAllowed } from '../../src/config/outbound.js';
import { ProjectMetadataSchema } from '../../src/config/metadata.js';
import { checkOperatorConfig } from '../../src/config/operator-checks.js';
import { createBudgets } from '../../src/outbound/budget.js';
import { isPrivateAddress } from '../../src/outbound/addresses.js';
import { usageTap } from '../../src/outbound/usage.js';
import { agentArgv } from '../../src/plan/agent-command.js';
import { KEY_PLACEHOLDER, planOutbound, withRelays } from '../../src/plan/outbound.js';
import { checkModels } from '../../src/doctor-outbound.js';

describe('egress allowlist matching', () => {
  const list = ['registry.npmjs.org', '*.debian.org', 'git.example.com:8443'];
  it.each([
    ['registry.npmjs.org', 443, true],
    ['REGISTRY.npmjs.org.', 80, true],
    ['registry.npmjs.org', 22, false],
    ['deb.debian.org', 443, true],
    ['debian.org', 443, false],
    ['evil-debian.org', 443, false],
    ['registry.npmjs.org.evil.test', 443, false],
    ['git.example.com', 8443, true],
    ['git.example.com', 443, false],
    ['127.0.0.1', 443, false],
  ] as const)('%s:%i → %s', (host, port, allowed) => {
    expect(hostAllowed(list, host, port)).toBe(allowed);
  });

  it('patterns are host names, never URLs, IP ranges or bare wildcards', () => {
    for (const ok of ['a.b', '*.b.c', 'x:443', 'localhost']) expect(HostPatternSchema.safeParse(ok).success, ok).toBe(true);
    for (const bad of ['*', '*.', 'https://a.b', 'a.b/path', '10.0.0.0/8', 'A.B', 'a..b', 'a.b:0', 'a.b:70000', '*.*.b', 'a b']) expect(HostPatternSchema.safeParse(bad).success, bad).toBe(false);
  });

  it('model patterns: "*" is any run of characters, the rest literal', () => {
    expect(modelAllowed(['claude-*'], 'claude-sonnet-4-5')).toBe(true);
    expect(modelAllowed(['claude-*'], 'gpt-5')).toBe(false);
    expect(modelAllowed(['claude-3.5'], 'claude-305')).toBe(false);
  });
});

describe('private addresses (the proxy never connects to these unless the operator names the host)', () => {
  it.each(['127.0.0.1', '10.1.2.3', '172.20.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '::1', '::ffff:127.0.0.1', 'fe80::1', 'fd00::1', 'not-an-ip'])('%s is private', (a) => {
    expect(isPrivateAddress(a)).toBe(true);
  });
  it.each(['1.1.1.1', '151.101.0.1', '2a04:4e42::1'])('%s is public', (a) => {
    expect(isPrivateAddress(a)).toBe(false);
  });
});

describe('model budget (rolling hour, per tenant)', () => {
  const limits = { requests_per_hour: 3, tokens_per_hour: 1000 };
  it('counts requests and tokens per tenant and frees up as the hour rolls', () => {
    const b = createBudgets();
    const t0 = Date.UTC(2026, 0, 1, 12, 0, 30);
    for (let i = 0; i < 3; i++) expect(b.take('p\0a', limits, t0 + i * 60_000)).toEqual({ ok: true });
    const spent = b.take('p\0a', limits, t0 + 3 * 60_000);
    expect(spent).toMatchObject({ ok: false, reason: '3 model calls per hour' });
    expect(b.take('p\0b', limits, t0)).toEqual({ ok: true }); // another tenant is not affected
    expect(b.take('p\0a', limits, t0 + 3_600_000)).toEqual({ ok: true }); // the first minute has left the window
    b.spend('p\0b', 5000, t0);
    expect(b.take('p\0b', limits, t0 + 1000)).toMatchObject({ ok: false, reason: '1000 tokens per hour', retryAfterS: expect.any(Number) });
  });
  it('keys are never object properties', () => {
    const b = createBudgets();
    expect(b.take('__proto__', limits)).toEqual({ ok: true });
    expect(b.take('constructor', limits)).toEqual({ ok: true });
  });
});

describe('token counting of what streams past', () => {
  it('Anthropic SSE: input from message_start, output from message_delta, split anywhere', () => {
    const tap = usageTap('text/event-stream', 1024);
    const text =
      'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":12,"cache_read_input_tokens":3,"output_tokens":1}}}\n\n' +
      'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":40}}\n\n';
    for (let i = 0; i < text.length; i += 7) tap.push(Buffer.from(text.slice(i, i + 7)));
    expect(tap.result()).toEqual({ input: 15, output: 40, known: true });
  });
  it('OpenAI: response.completed or a JSON body; unknown shapes count 0', () => {
    const sse = usageTap('text/event-stream', 1024);
    sse.push(Buffer.from('data: {"type":"response.completed","response":{"usage":{"input_tokens":7,"output_tokens":9}}}\n\n'));
    expect(sse.result()).toEqual({ input: 7, output: 9, known: true });
    const json = usageTap('application/json', 1024);
    json.push(Buffer.from('{"usage":{"prompt_tokens":4,"completion_tokens":6}}'));
    expect(json.result()).toEqual({ input: 4, output: 6, known: true });
    const odd = usageTap('application/json', 1024);
    odd.push(Buffer.from('{"usage":{"input_tokens":-5,"output_tokens":"many"}}'));
    expect(odd.result()).toEqual({ input: 0, output: 0, known: true });
  });
});

describe('outbound plan (pure)', () => {
  const config = BerthConfigSchema.parse({ models: { anthropic: { api: 'anthropic', url: 'https://api.anthropic.com', api_key: 'sk-real' }, oai: { api: 'openai', url: 'https://api.openai.com', api_key: 'sk-oai' } } });
  const meta = (models: unknown) => ProjectMetadataSchema.parse({ name: 'p', models });

  it('low: gateway and model sockets, the placeholder key, no proxy; the real key appears nowhere', () => {
    const plan = planOutbound({ config, metadata: meta({ upstreams: ['anthropic', 'oai'] }), agentRun: true, egress: false }, '/run/berth');
    expect(plan.sockets).toEqual(['gateway', 'model']);
    expect(plan.env).toMatchObject({ ANTHROPIC_BASE_URL: 'http://127.0.0.1:41400/anthropic', ANTHROPIC_API_KEY: KEY_PLACEHOLDER, OPENAI_BASE_URL: 'http://127.0.0.1:41400/oai/v1', OPENAI_API_KEY: KEY_PLACEHOLDER });
    expect(plan.env.HTTPS_PROXY).toBeUndefined();
    expect(JSON.stringify(plan)).not.toMatch(/sk-real|sk-oai/);
  });

  it('medium/high: the egress proxy; the shell tool gets no model; an unknown upstream is a warning', () => {
    const plan = planOutbound({ config, metadata: meta({ upstreams: ['nope'] }), agentRun: false, egress: true }, '/run/berth');
    expect(plan.sockets).toEqual(['egress']);
    expect(plan.env.HTTPS_PROXY).toBe('http://127.0.0.1:41401');
    expect(plan.warnings).toEqual([`model upstream "nope" is allowed but berth.yaml's models has no such entry`]);
  });

  it('berth-bridge starts the relays before the agent; no relay, no wrapper', () => {
    expect(withRelays(['claude', '-p'], ['gateway', 'model', 'egress'], '/run/berth')).toEqual(['berth-bridge', 'relay', '41400=/run/berth/model.sock', '41401=/run/berth/egress.sock', '--', 'claude', '-p']);
    expect(withRelays(['sh'], ['gateway'], '/run/berth')).toEqual(['sh']);
  });

  it("presets continue the session's conversation; codex is told where berth's gateway is", () => {
    expect(agentArgv('claude', 'hi')).toEqual(['claude', '-p', '--dangerously-skip-permissions', '--continue', '--', 'hi']);
    expect(agentArgv('codex', 'hi', { openaiBaseUrl: 'http://127.0.0.1:41400/oai/v1' })).toEqual([
      'codex', 'exec', 'resume', '--last',
      '-c', 'model_providers.berth={name="berth",base_url="http://127.0.0.1:41400/oai/v1",env_key="OPENAI_API_KEY",wire_api="responses",supports_websockets=false}',
      '-c', 'model_provider=berth',
      '--dangerously-bypass-approvals-and-sandbox', '--skip-git-repo-check', '--', 'hi',
    ]);
    expect(agentArgv('shell', 'echo')).toEqual(['sh', '-c', '--', 'echo']);
  });
});

describe("operator check: a model key in berth.yaml's env (which containers get) is refused", () => {
  it('by name, by value, or with the key inside the value', () => {
    const config = BerthConfigSchema.parse({ env: { ANTHROPIC_API_KEY: 'x', OTHER: 'sk-real', WRAPPED: 'Bearer sk-real\n', FINE: 'ok' }, models: { a: { api: 'anthropic', url: 'https://api.anthropic.com', api_key: 'sk-real' } } });
    expect(checkOperatorConfig(config, '/tmp').map((i) => i.field).sort()).toEqual(['env.ANTHROPIC_API_KEY', 'env.OTHER', 'env.WRAPPED']);
  });
});

describe('doctor: projects that need a model', () => {
  it('says so when an agent preset can call no model, and names an upstream berth.yaml lacks', () => {
    const config = BerthConfigSchema.parse({ models: { anthropic: { api: 'anthropic', url: 'https://api.anthropic.com', api_key: 'k' } } });
    const checks = checkModels(config, [
      { name: 'a', metadata: ProjectMetadataSchema.parse({ name: 'a', agent: 'claude' }) },
      { name: 'b', metadata: ProjectMetadataSchema.parse({ name: 'b', agent: 'claude', models: { upstreams: ['anthropic'] } }) },
      { name: 'c', metadata: ProjectMetadataSchema.parse({ name: 'c', models: { upstreams: ['gone'] } }) },
      { name: 'd', metadata: ProjectMetadataSchema.parse({ name: 'd' }) },
    ]);
    expect(checks.map((c) => [c.name, c.status])).toEqual([
      ['models a', 'warn'],
      ['models b', 'ok'],
      ['models c', 'warn'],
    ]);
    expect(checks[0]?.detail).toContain('berth project update a --model <upstream>');
    expect(JSON.stringify(checks)).not.toContain('"k"');
  });
});
