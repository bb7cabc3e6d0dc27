import { homePaths } from '../config/home.js';
import { runDemo } from './demo.js';
import { runDoctor } from './doctor.js';
import { BerthError } from '../base/errors.js';
import { buildImage, IMAGE_NAMES, type ImageName } from '../images/build.js';
import { runBridgesOnly, runServer, runStdioMcp } from './serve.js';
import { installedBin, mcpClientConfig } from '../mcp/client-config.js';
import { approveSender, denySender, pairingChannelOf, pendingSenders } from '../bridges/senders.js';
import { CHANNELS } from '../channels/registry.js';
import { printable } from '../base/printable.js';
import { need, type Command } from './command.js';

/** Images, checks, and the long-running surfaces. */
export const ENGINE_COMMANDS: Record<string, Command> = {
  'images build': {
    usage:
      "images build [shell|agent]... [--base IMAGE] [--force]\n  Build berth's images with no container registry (default: shell), with progress. agent: Debian made with\n  mmdebstrap from Debian's mirrors, plus the pinned claude and codex CLIs from the npm registry (about 340 MB,\n  cached in .berth/cache): 1-20 min the first time, about 30 s once the base and tarballs are cached;\n  skipped when up to date unless --force; --base IMAGE builds it on a registry image instead.",
    options: { base: { type: 'string' }, force: { type: 'boolean' } },
    async run(berth, v, pos, io) {
      const names = (pos.length ? pos : ['shell']) as ImageName[];
      for (const name of names) {
        if (!IMAGE_NAMES.includes(name)) throw new BerthError('USAGE', `unknown image "${name}" (known: ${IMAGE_NAMES.join(', ')})`);
      }
      const b = berth();
      for (const name of names) {
        io.err(`berth: building ${b.config.images[name]} ...\n`);
        const { tag, built } = await buildImage({
          images: b.images,
          config: b.config,
          name,
          cacheDir: homePaths(b.home).cacheDir,
          base: v.base as string | undefined,
          force: v.force === true,
          onProgress: (l) => io.err(`  ${l}\n`),
        });
        io.out(built ? `built ${tag}\n` : `${tag} is up to date\n`);
      }
      return 0;
    },
  },
  doctor: {
    usage:
      'doctor [--json]\n  One screen of checks (config, projects, engine, runc, images, disk, host paths); exits 1 when berth is not safe to run as configured. --json prints {ok, checks}.',
    options: { json: { type: 'boolean' } },
    async run(berth, v, pos, io) {
      need(pos, 0, '');
      const checks = await runDoctor(berth());
      if (v.json) {
        io.out(`${JSON.stringify({ ok: checks.every((c) => c.status !== 'fail'), checks }, null, 2)}\n`);
        return checks.some((c) => c.status === 'fail') ? 1 : 0;
      }
      const mark = { ok: 'ok  ', warn: 'WARN', fail: 'FAIL' } as const;
      for (const c of checks) io.out(`${mark[c.status]}  ${c.name.padEnd(28)} ${c.detail}\n`);
      const failed = checks.filter((c) => c.status === 'fail').length;
      io.out(failed ? `\n${failed} problem(s): berth is not safe to run as configured\n` : '\nall checks passed\n');
      return failed ? 1 : 0;
    },
  },
  serve: {
    usage:
      'serve [--host HOST] [--port PORT] [--demo]\n  The HTTP admin API, /docs, /openapi.json, MCP at /mcp (and /mcp/session), the web chat at /chat and /metrics, until SIGINT/SIGTERM (SIGTERM drains: no new runs, runs in flight get berth.yaml runs.drain_seconds). --demo makes the demo project first. BERTH_METRICS_TOKEN: a token for /metrics alone. It binds the port before anything else (taken: ADDRESS_IN_USE, exit 25) and refuses to start beside a live consumer of a chat bridge of this home (ALREADY_RUNNING, exit 26). Channels sent their messages by HTTP (Telegram in webhook mode, signed webhooks) are answered at /hooks/.',
    options: { host: { type: 'string' }, port: { type: 'string' }, demo: { type: 'boolean' } },
    logLevel: 'info',
    longRunning: true,
    async run(berth, v, pos, io, env) {
      need(pos, 0, '');
      const port = Number(v.port ?? 8080);
      if (!Number.isInteger(port) || port < 0 || port > 65535) throw new BerthError('USAGE', `--port must be 0-65535, not "${v.port}"`);
      return runServer(
        berth(),
        { host: (v.host as string | undefined) ?? '127.0.0.1', port, demo: Boolean(v.demo), envToken: env.BERTH_ADMIN_TOKEN },
        io,
      );
    },
  },
  ...bridgeCommands(),
  'bridge pending': {
    usage:
      'bridge pending\n  Senders waiting for approval (a bridge with senders: pairing), one per line: the sender key, their name, when first seen, and the first message they sent (kept unrun until an answer).',
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 0, '');
      const b = berth();
      const pending = pendingSenders(b.config, homePaths(b.home).stateDir);
      if (pending.length === 0) io.out('no sender is waiting\n');
      for (const p of pending)
        io.out(
          `${printable(p.sender)}\t${printable(p.name ?? '')}\tfirst seen ${p.first_seen}${p.first_message === undefined ? '' : `\tfirst message: ${printable(p.first_message.slice(0, 200))}`}\n`,
        );
      return 0;
    },
  },
  'bridge approve': {
    usage: 'bridge approve <sender>\n  Let a sender talk to the bot (the key "bridge pending" shows, e.g. signal:<uuid> or telegram:<id>).',
    options: {},
    async run(berth, _v, pos, io) {
      const sender = senderArg(pos);
      const b = berth();
      const r = await approveSender({ config: b.config, stateDir: homePaths(b.home).stateDir, logger: b.logger }, sender);
      b.audit.record({ kind: 'admin', action: 'bridge.approve', target: sender, outcome: 'ok' });
      io.out(
        `approved ${printable(sender)}${r.was_pending ? '' : ' (it was not waiting)'}${r.held ? '; their first message is answered by the running bridge (or at its next start)' : ''}\n`,
      );
      if (r.told === true) io.out('told them they can talk now\n');
      else if (r.told) io.err(`berth: approved, but could not tell them (${printable(r.told)}); they can talk now all the same\n`);
      return 0;
    },
  },
  'bridge deny': {
    usage:
      'bridge deny <sender>\n  Turn a waiting sender away: no longer pending, never asked about again, their kept first message dropped unrun ("bridge approve" lets them in later).',
    options: {},
    async run(berth, _v, pos, io) {
      const sender = senderArg(pos);
      const b = berth();
      const r = denySender(homePaths(b.home).stateDir, sender);
      if (!r.was_pending)
        throw new BerthError('NOT_FOUND', `${sender} is not waiting for approval`, { hint: 'berth bridge pending lists who is' });
      b.audit.record({ kind: 'admin', action: 'bridge.deny', target: sender, outcome: 'ok' });
      io.out(`turned away ${printable(sender)}\n`);
      return 0;
    },
  },
  mcp: {
    usage:
      "mcp [--print-config]\n  The admin tools as an MCP server over stdio, until stdin closes. --print-config prints the mcpServers entry an MCP client needs to start it: this node and this install's bin/berth.js by absolute path, and this home.",
    options: { 'print-config': { type: 'boolean' } },
    async run(berth, v, pos, io) {
      need(pos, 0, '');
      if (v['print-config']) {
        io.out(`${JSON.stringify(mcpClientConfig({ node: process.execPath, bin: installedBin(), home: berth().home }), null, 2)}\n`);
        return 0;
      }
      return runStdioMcp(berth());
    },
  },
  demo: {
    usage:
      'demo\n  Two tenants, one boundary: a scripted walk-through, as tenants of its own (demo:alice, demo:bob), so the people of the demo project keep their files and sessions as they left them.',
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 0, '');
      return runDemo(berth(), io);
    },
  },
};

/** The sender argument of bridge approve|deny: a sender key of a channel with pairing (signal:<uuid>, telegram:<id>). */
function senderArg(pos: string[]): string {
  need(pos, 1, 'sender key');
  const sender = pos[0] as string;
  pairingChannelOf(sender);
  return sender;
}

/** `berth bridge <name>` for every channel of the registry. */
function bridgeCommands(): Record<string, Command> {
  return Object.fromEntries(
    CHANNELS.map((channel): [string, Command] => [
      `bridge ${channel.name}`,
      {
        usage: `bridge ${channel.name}\n  Only the ${channel.title} bridge (berth.yaml bridges.${channel.name}), no HTTP server, until SIGINT/SIGTERM. 'berth serve' runs it too: one consumer per bridge and home, so beside a live one it refuses (ALREADY_RUNNING, exit 26). A bridge sent its messages by HTTP is answered by berth serve alone.\n  Tenants: ${channel.tenants.direct}; groups: ${channel.tenants.groups}.\n  Replies: up to ${channel.sends.inlineLimit} in one message; longer: ${channel.sends.longReplies}.\n  Files: ${channel.sends.files}.\n  Set up: ${channel.guide}.`,
        options: {},
        logLevel: 'info',
        longRunning: true,
        async run(berth, _v, pos, io) {
          need(pos, 0, '');
          return runBridgesOnly(berth(), io, channel.name);
        },
      },
    ]),
  );
}
