import fs from 'node:fs';
import { join, relative } from 'node:path';
import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { CHANNELS, CHANNEL_NAMES } from '../../src/channels/registry.js';
import type { ChannelModule } from '../../src/channels/contract.js';
import { BridgesSchema } from '../../src/config/bridges.js';
import { BerthConfigSchema } from '../../src/config/berth-config-schema.js';
import { ENGINE_COMMANDS } from '../../src/cli/server.js';
import { pino } from 'pino';
import { slackChannel, slackMessage } from '../../src/channels/slack.js';
import { telegramChannel } from '../../src/channels/telegram.js';

/**
 * A new chat channel is one module in src/channels/ and one entry in its registry (issue 27):
 * berth.yaml's bridges, `berth bridge <name>`, pairing, doctor and /hooks all come from the list,
 * and no code outside src/channels/ names a channel.
 */
const ROOT = join(import.meta.dirname, '..', '..');

function sourceFiles(dir: string): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? sourceFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []));
}

describe('the channel registry', () => {
  it('names each channel once, with nothing a CLI word or the web chat already is', () => {
    expect(new Set(CHANNEL_NAMES).size).toBe(CHANNEL_NAMES.length);
    for (const name of CHANNEL_NAMES) {
      expect(name).toMatch(/^[a-z][a-z0-9-]{1,30}$/);
      expect(['pending', 'approve', 'deny', 'web']).not.toContain(name);
    }
  });

  it('every channel declares what the core and the docs need, and its guide exists', () => {
    for (const c of CHANNELS as readonly ChannelModule[]) {
      expect(c.title, c.name).toBeTruthy();
      expect(c.tenants.direct, c.name).toMatch(new RegExp(`^[a-z-]+:`));
      expect(['stream', 'poll', 'http'], c.name).toContain(c.receives({}));
      expect(fs.existsSync(join(ROOT, c.guide)), `${c.name}: ${c.guide}`).toBe(true);
      // A pairing channel's sender keys start with its name (berth bridge approve finds the channel by the key).
      if (c.pairing) expect(c.senderKey.test(`${c.name}:x`) || c.senderKey.source.startsWith(`^${c.name}:`), c.name).toBe(true);
    }
  });

  it('every setting of every channel is described (berth config and the reference read the descriptions)', () => {
    for (const c of CHANNELS) {
      const schema = z.toJSONSchema(c.schema, { io: 'input', unrepresentable: 'any' }) as {
        properties: Record<string, { description?: string }>;
      };
      for (const [key, prop] of Object.entries(schema.properties)) expect(prop.description, `bridges.${c.name}.${key}`).toBeTruthy();
    }
  });

  it("berth.yaml's bridges has exactly one key per channel besides the common settings", () => {
    const keys = Object.keys(BridgesSchema.unwrap().shape ?? {});
    expect(keys.sort()).toEqual(['max_concurrent_runs', 'progress_message_after_seconds', 'public_url', 'web', ...CHANNEL_NAMES].sort());
  });

  it('berth bridge <name> exists for every channel, and only for them', () => {
    const bridgeCommands = Object.keys(ENGINE_COMMANDS).filter(
      (n) => n.startsWith('bridge ') && !['bridge pending', 'bridge approve', 'bridge deny'].includes(n),
    );
    expect(bridgeCommands.sort()).toEqual(CHANNEL_NAMES.map((n) => `bridge ${n}`).sort());
  });

  it("a signed webhook named like a channel is refused: it would take that channel's /hooks path", () => {
    const r = BerthConfigSchema.safeParse({ bridges: { webhook: { hooks: { telegram: { secret: 'x'.repeat(40) } } } } });
    expect(r.error?.issues.map((i) => [i.path.join('.'), i.message])).toEqual([
      ['bridges.webhook', expect.stringContaining('/hooks/telegram')],
    ]);
  });

  it('no code outside src/channels/ names a channel (comments and descriptions aside)', () => {
    const offenders: string[] = [];
    const names = CHANNEL_NAMES.join('|');
    const literal = new RegExp(`(['"\`])(${names})(:|\\1)|bridges\\??\\.(${names})\\b`);
    for (const file of sourceFiles(join(ROOT, 'src')).filter((f) => !f.includes(`${join('src', 'channels')}/`))) {
      fs.readFileSync(file, 'utf8')
        .split('\n')
        .forEach((line, i) => {
          const code = line.trim();
          if (
            code.startsWith('*') ||
            code.startsWith('//') ||
            code.startsWith('/*') ||
            code.includes('.describe(') ||
            code.includes('usage:') ||
            /^'.*',?$/.test(code)
          )
            return;
          if (literal.test(code)) offenders.push(`${relative(ROOT, file)}:${i + 1}: ${code.slice(0, 120)}`);
        });
    }
    expect(offenders).toEqual([]);
  });
});

describe('what every channel shares', () => {
  it("a thread's profiles: the thread, its channel or group, then every chat (channels.slack:C123 answers every thread in C123)", () => {
    const ctx = {
      logger: pino({ level: 'silent' }),
      dir: '/nonexistent',
      take: () => 'duplicate' as const,
      postOut: async () => ({ status: 200 }),
    };
    const slack = slackChannel.create({ ...ctx, config: slackChannel.schema.parse({ bot_token: 'xoxb-x', signing_secret: 's' }) });
    expect(slack.profileKeys!('C0TEAM001/1700000000.000100')).toEqual(['slack:C0TEAM001/1700000000.000100', 'slack:C0TEAM001', 'slack']);
    expect(slack.profileKeys!('D0ALICE01')).toEqual(['slack:D0ALICE01', 'slack']);
    const telegram = telegramChannel.create({ ...ctx, config: telegramChannel.schema.parse({ token: '1:x' }) });
    expect(telegram.profileKeys!('-1001234/7')).toEqual(['telegram:-1001234/7', 'telegram:-1001234', 'telegram']);
    expect(telegram.profileKeys!('5001')).toEqual(['telegram:5001', 'telegram']);
  });

  it('a Slack text of many "<" is read in one pass, not once per "<"', () => {
    // Ten times the text, about ten times the work (a pass per "<" would be a hundred): a ratio
    // of the same run, the best of three each, so a busy machine slows both alike.
    const read = (n: number) => {
      let best = Infinity;
      for (let i = 0; i < 3; i++) {
        const started = performance.now();
        const m = slackMessage({
          type: 'event_callback',
          event: { type: 'message', channel_type: 'im', channel: 'D0X1', user: 'U0X1', ts: '1.2', text: '<'.repeat(n) },
        });
        best = Math.min(best, performance.now() - started);
        expect(m?.text.length).toBe(n);
      }
      return best;
    };
    read(8_000); // warm up the JIT
    expect(read(80_000) / read(8_000)).toBeLessThan(35);
  });
});
