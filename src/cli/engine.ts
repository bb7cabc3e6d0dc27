import { runDemo } from '../demo.js';
import { runDoctor } from '../doctor.js';
import { BerthError } from '../errors.js';
import { buildImage, IMAGE_NAMES, type ImageName } from '../images/build.js';
import { runServer, runStdioMcp } from '../serve.js';
import { need, type Command } from './command.js';

/** Images, checks, and the long-running surfaces. */
export const ENGINE_COMMANDS: Record<string, Command> = {
  'images build': {
    options: { base: { type: 'string' } },
    async run(berth, v, pos, io) {
      const names = (pos.length ? pos : ['shell']) as ImageName[];
      for (const name of names) {
        if (!IMAGE_NAMES.includes(name)) throw new BerthError('USAGE', `unknown image "${name}" (known: ${IMAGE_NAMES.join(', ')})`);
      }
      const b = berth();
      for (const name of names) {
        io.err(`berth: building ${b.config.images[name]} ...\n`);
        const tag = await buildImage({ engine: b.engine, config: b.config, name, base: v.base as string | undefined, onProgress: (l) => io.err(`  ${l}\n`) });
        io.out(`built ${tag}\n`);
      }
      return 0;
    },
  },
  doctor: {
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 0, '');
      const checks = await runDoctor(berth());
      const mark = { ok: 'ok  ', warn: 'WARN', fail: 'FAIL' } as const;
      for (const c of checks) io.out(`${mark[c.status]}  ${c.name.padEnd(28)} ${c.detail}\n`);
      const failed = checks.filter((c) => c.status === 'fail').length;
      io.out(failed ? `\n${failed} problem(s): berth is not safe to run as configured\n` : '\nall checks passed\n');
      return failed ? 1 : 0;
    },
  },
  serve: {
    options: { host: { type: 'string' }, port: { type: 'string' }, demo: { type: 'boolean' } },
    logLevel: 'info',
    async run(berth, v, pos, io, env) {
      need(pos, 0, '');
      const port = Number(v.port ?? 8080);
      if (!Number.isInteger(port) || port < 0 || port > 65535) throw new BerthError('USAGE', `--port must be 0-65535, not "${v.port}"`);
      return runServer(berth(), { host: (v.host as string | undefined) ?? '127.0.0.1', port, demo: Boolean(v.demo), envToken: env.BERTH_ADMIN_TOKEN }, io);
    },
  },
  mcp: {
    options: {},
    async run(berth, _v, pos) {
      need(pos, 0, '');
      return runStdioMcp(berth());
    },
  },
  demo: {
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 0, '');
      return runDemo(berth(), io);
    },
  },
};
