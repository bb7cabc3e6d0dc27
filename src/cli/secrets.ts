import { resolve } from 'node:path';
import { homePaths } from '../config/home.js';
import { SECRET_METHODS, SecretGrantSchema, SecretNameSchema, secretEntry, type SecretEntry, type SecretGrant } from '../config/secrets.js';
import { BerthError } from '../base/errors.js';
import type { Berth } from '../main.js';
import { printable } from '../base/printable.js';
import { createSecretValues, removeStoredSecret, storeSecretValue } from '../store/secret-values.js';
import { need, type Command } from './command.js';

/**
 * `berth secret ...`: credentials berth keeps and its egress proxy adds to granted HTTPS
 * requests (docs/secrets.md). Everything goes to berth.yaml through the operator's edits
 * (checked whole, comments kept, audited); a value is never printed, only where it comes from.
 */
const MAX_STDIN = 16 * 1024;

function nameArg(pos: string[]): string {
  need(pos, 1, 'secret name');
  const parsed = SecretNameSchema.safeParse(pos[0]);
  if (!parsed.success)
    throw new BerthError('USAGE', `secret name "${printable(pos[0] as string)}" ${parsed.error.issues[0]?.message ?? 'is not valid'}`, {
      hint: 'e.g. GH_TOKEN: the container sees a placeholder in a variable of that name',
    });
  return parsed.data;
}

function entryOf(berth: Berth, name: string): SecretEntry | undefined {
  return secretEntry(berth.config.secrets, name);
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of process.stdin) {
    size += (chunk as Buffer).length;
    if (size > MAX_STDIN) throw new BerthError('PAYLOAD_TOO_LARGE', `the value on stdin is larger than ${MAX_STDIN} bytes`);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('latin1');
}

/** A command given as one string: JSON argv (["pass", "show", "gh"]) or words split at spaces (never a shell). */
function commandArgv(text: string): string[] {
  if (text.trim().startsWith('[')) {
    const argv: unknown = JSON.parse(text);
    if (Array.isArray(argv) && argv.length && argv.every((a) => typeof a === 'string')) return argv as string[];
    throw new BerthError('USAGE', '--from-command: a JSON list of strings, or words separated by spaces');
  }
  return text.split(/\s+/).filter(Boolean);
}

function describeSource(e: SecretEntry): string {
  if (e.file !== undefined) return `file ${e.file}`;
  if (e.env !== undefined) return `berth's environment $${e.env}`;
  return `command ${JSON.stringify(e.command)}`;
}

function describeGrant(g: SecretGrant): string {
  const parts = [`${g.project} → ${g.host}${g.path_prefix ?? ''}`];
  if (g.methods) parts.push(g.methods.join(','));
  parts.push(`${g.header}: ${g.basic_user ? `Basic (${g.basic_user}:…)` : (g.format ?? 'Bearer {}')}`);
  if (g.per_tenant_per_minute) parts.push(`≤ ${g.per_tenant_per_minute}/min per person`);
  if (g.ask === 'first_use') parts.push('asks before its first use in a conversation');
  return parts.join(', ');
}

export const SECRET_COMMANDS: Record<string, Command> = {
  'secret set': {
    usage:
      "secret set <NAME> (--from-file PATH | --from-env VAR | --from-command CMD | --stdin)\n  Keep a credential for agents to use without holding it: the value is read from a file (mode 0600, berth's user), berth's own environment, a command (argv, no shell; JSON list or words) or stdin (then stored in berth's private state, 0600). It is read once now to check it; never printed. Its grants stay.",
    options: {
      'from-file': { type: 'string' },
      'from-env': { type: 'string' },
      'from-command': { type: 'string' },
      stdin: { type: 'boolean' },
    },
    async run(berth, v, pos, io, env) {
      const name = nameArg(pos);
      const given = ['from-file', 'from-env', 'from-command', 'stdin'].filter((k) => v[k] !== undefined && v[k] !== false);
      if (given.length !== 1) throw new BerthError('USAGE', 'give exactly one of --from-file, --from-env, --from-command or --stdin');
      const b = berth();
      const kept = entryOf(b, name);
      const stateDir = homePaths(b.home).stateDir;
      let source: Partial<SecretEntry>;
      if (v.stdin) source = { file: storeSecretValue(stateDir, name, await readStdin()) };
      // As given, made absolute: a link the operator rotates (a mounted secret) keeps being followed.
      else if (v['from-file'] !== undefined) source = { file: resolve(String(v['from-file'])) };
      else if (v['from-env'] !== undefined) source = { env: String(v['from-env']) };
      else source = { command: commandArgv(String(v['from-command'])) };
      const entry = {
        ...(kept?.grants.length ? { grants: kept.grants } : {}),
        ...(kept && source.command ? { refresh_seconds: kept.refresh_seconds } : {}),
        ...source,
      };
      // Read it once as the proxy would (berth serve's environment may differ for --from-env: said, not refused).
      try {
        await createSecretValues(env).get(name, { refresh_seconds: 300, grants: [], ...source } as SecretEntry);
      } catch (err) {
        if (source.env === undefined) throw err;
        io.err(`berth: note: this shell has no $${source.env}; berth serve must have it in its environment\n`);
      }
      await b.operator.setConfig(['secrets', name], entry);
      if (kept?.file && kept.file !== source.file) removeStoredSecret(stateDir, kept.file);
      io.out(
        `set ${name} (from ${describeSource(entry as SecretEntry)}); ${kept?.grants.length ? `${kept.grants.length} grant(s) kept` : `no grants yet: berth secret grant ${name} --project P --host HOST`}\n`,
      );
      return 0;
    },
  },
  'secret list': {
    usage:
      'secret list [--json]\n  The secrets berth keeps: where each value comes from, whether it can be read now, and its grants. Never a value.',
    options: { json: { type: 'boolean' } },
    async run(berth, v, pos, io, env) {
      need(pos, 0, '');
      const b = berth();
      const values = createSecretValues(env);
      const rows = await Promise.all(
        Object.entries(b.config.secrets).map(async ([name, e]) => {
          let readable = 'ok';
          try {
            await values.get(name, e);
          } catch (err) {
            readable = err instanceof Error ? err.message.replace(`secret ${name}: `, '') : 'cannot be read';
          }
          return { name, source: describeSource(e), readable, grants: e.grants };
        }),
      );
      if (v.json) io.out(`${JSON.stringify(rows, null, 2)}\n`);
      else if (!rows.length) io.out('no secrets (berth secret set NAME --from-file PATH)\n');
      else
        for (const r of rows) {
          io.out(`${r.name}  from ${r.source}  ${r.readable === 'ok' ? 'readable' : `NOT READABLE: ${r.readable}`}\n`);
          for (const g of r.grants) io.out(`  granted: ${describeGrant(g)}\n`);
          if (!r.grants.length) io.out('  granted to no project\n');
        }
      return 0;
    },
  },
  'secret rm': {
    usage:
      'secret rm <NAME>\n  Forget a secret and all its grants (a value berth stored itself is deleted; your own files stay). The next request goes without it.',
    options: {},
    async run(berth, _v, pos, io) {
      const name = nameArg(pos);
      const b = berth();
      const kept = entryOf(b, name);
      if (!kept) throw new BerthError('NOT_FOUND', `berth keeps no secret ${name}`, { hint: 'berth secret list' });
      await b.operator.unsetConfig(['secrets', name]);
      const deleted = removeStoredSecret(homePaths(b.home).stateDir, kept.file);
      io.out(`removed ${name}${deleted ? ' and its stored value' : ''}\n`);
      return 0;
    },
  },
  'secret grant': {
    usage: `secret grant <NAME> --project P --host HOST [--path-prefix /P] [--methods GET,POST] [--header H] [--format F | --basic-user U] [--per-minute N] [--ask-first]\n  Let project P's agents (levels medium and high) use the secret toward HOST (exact or *.suffix, optionally :port; HTTPS only): berth adds it as "H: F" ("Authorization: Bearer {}" by default; --basic-user: Basic auth, e.g. x-access-token for git). The host becomes reachable for P. Methods: ${SECRET_METHODS.join(', ')}. --ask-first: the first request of a conversation that would carry it waits for its person's (or the operator's, as chat.approvals says) yes. A grant for the same project, host and path prefix is replaced.`,
    options: {
      project: { type: 'string' },
      host: { type: 'string' },
      'path-prefix': { type: 'string' },
      methods: { type: 'string' },
      header: { type: 'string' },
      format: { type: 'string' },
      'basic-user': { type: 'string' },
      'per-minute': { type: 'string' },
      'ask-first': { type: 'boolean' },
    },
    async run(berth, v, pos, io) {
      const name = nameArg(pos);
      const b = berth();
      const kept = entryOf(b, name);
      if (!kept)
        throw new BerthError('NOT_FOUND', `berth keeps no secret ${name}`, { hint: `berth secret set ${name} --from-file PATH first` });
      if (v.project === undefined || v.host === undefined) throw new BerthError('USAGE', 'grant needs --project and --host');
      b.store.get(String(v.project)); // PROJECT_NOT_FOUND before anything is written
      const parsed = SecretGrantSchema.safeParse({
        project: v.project,
        host: v.host,
        ...(v['path-prefix'] !== undefined ? { path_prefix: v['path-prefix'] } : {}),
        ...(v.methods !== undefined ? { methods: String(v.methods).toUpperCase().split(',').filter(Boolean) } : {}),
        ...(v.header !== undefined ? { header: v.header } : {}),
        ...(v.format !== undefined ? { format: v.format } : {}),
        ...(v['basic-user'] !== undefined ? { basic_user: v['basic-user'] } : {}),
        ...(v['per-minute'] !== undefined ? { per_tenant_per_minute: Number(v['per-minute']) } : {}),
        ...(v['ask-first'] ? { ask: 'first_use' } : {}),
      });
      if (!parsed.success) {
        const issues = parsed.error.issues.map((i) => ({
          field: `--${String(i.path[0] ?? 'grant')
            .replace(/_/g, '-')
            .replace('per-tenant-per-minute', 'per-minute')}`,
          reason: i.message,
        }));
        throw new BerthError('CONFIG_INVALID', `the grant is not valid: ${issues.map((i) => `${i.field} ${i.reason}`).join('; ')}`, {
          issues,
        });
      }
      const grant = parsed.data;
      const same = (g: SecretGrant) => g.project === grant.project && g.host === grant.host && g.path_prefix === grant.path_prefix;
      await b.operator.setConfig(['secrets', name, 'grants'], [...kept.grants.filter((g) => !same(g)), grant].map(stripDefaults));
      io.out(`granted ${name}: ${describeGrant(grant)}\n`);
      return 0;
    },
  },
  'secret revoke': {
    usage:
      "secret revoke <NAME> --project P [--host HOST]\n  Take a secret's grants from a project (all of them, or those toward HOST). It holds from the next request, on connections already open too.",
    options: { project: { type: 'string' }, host: { type: 'string' } },
    async run(berth, v, pos, io) {
      const name = nameArg(pos);
      if (v.project === undefined) throw new BerthError('USAGE', 'revoke needs --project');
      const b = berth();
      const kept = entryOf(b, name);
      if (!kept) throw new BerthError('NOT_FOUND', `berth keeps no secret ${name}`, { hint: 'berth secret list' });
      const gone = (g: SecretGrant) => g.project === v.project && (v.host === undefined || g.host === v.host);
      const removed = kept.grants.filter(gone).length;
      if (!removed)
        throw new BerthError(
          'NOT_FOUND',
          `${name} has no grant to project ${printable(String(v.project))}${v.host ? ` toward ${printable(String(v.host))}` : ''}`,
          { hint: 'berth secret list' },
        );
      await b.operator.setConfig(['secrets', name, 'grants'], kept.grants.filter((g) => !gone(g)).map(stripDefaults));
      io.out(`revoked ${removed} grant(s) of ${name} from ${printable(String(v.project))}\n`);
      return 0;
    },
  },
};

/** A grant as berth.yaml shows it: no defaults filled in, so the file reads as the operator said it. */
function stripDefaults(g: SecretGrant): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(g).filter(
      ([k, val]) => val !== undefined && !(k === 'header' && val === 'Authorization') && !(k === 'ask' && val === 'never'),
    ),
  );
}
