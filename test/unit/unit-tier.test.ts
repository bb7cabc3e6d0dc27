import fs from 'node:fs';
import os from 'node:os';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The unit tier needs nothing: no build (dist/), no engine, no process of berth's own. A unit test
 * calls the CLI in process (helpers/cli-main.ts), MCP in memory (helpers/mcp-memory.ts) and the
 * API with app.request; what needs the built CLI or Docker lives in test/integration.
 */
const ROOT = join(import.meta.dirname, '..', '..');
/** What starts the built CLI (bin/berth.js loads dist/) or reaches the engine. */
const NEEDS_A_BUILD_OR_ENGINE = ['cli', 'cliAsync', 'runDocLine', 'runDocLineAsync', 'BERTH_BIN', 'removeContainersOf'];

function unitFiles(dir: string): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? unitFiles(join(dir, e.name)) : e.name.endsWith('.test.ts') ? [join(dir, e.name)] : []));
}

/** The names a file imports from test/helpers.ts, and whether it imports dockerode (not only its types). */
function importsOf(file: string): { helpers: string[]; docker: boolean } {
  const text = fs.readFileSync(file, 'utf8');
  const helpers = [...text.matchAll(/^import\s*\{([^}]*)\}\s*from\s*'\.\.\/helpers\.js'/gm)].flatMap((m) =>
    (m[1] as string).split(',').map(
      (n) =>
        n
          .trim()
          .replace(/^type\s+/, '')
          .split(/\s+as\s+/)[0] as string,
    ),
  );
  return { helpers, docker: /^import\s+(?!type\b)[^;]*from\s+'dockerode'/m.test(text) }; // a type-only import asks nothing
}

describe('the unit tier', () => {
  it('imports nothing that runs the built CLI or asks the engine', () => {
    const files = [...unitFiles(join(ROOT, 'test/unit')), join(ROOT, 'test/contract/fake.test.ts')];
    expect(files.length).toBeGreaterThan(50);
    const offenders = files.flatMap((f) => {
      const { helpers, docker } = importsOf(f);
      return [...helpers.filter((n) => NEEDS_A_BUILD_OR_ENGINE.includes(n)), ...(docker ? ['dockerode'] : [])].map(
        (n) => `${relative(ROOT, f)}: ${n}`,
      );
    });
    expect(offenders).toEqual([]);
  });

  it('the guard sees such an import (it can fail)', () => {
    const probe = join(fs.mkdtempSync(join(os.tmpdir(), 'berth-unit-tier-')), 'x.test.ts');
    try {
      fs.writeFileSync(probe, "import { cli, type TestHome } from '../helpers.js';\nimport Docker from 'dockerode';\n");
      expect(importsOf(probe)).toEqual({ helpers: ['cli', 'TestHome'], docker: true });
      fs.writeFileSync(probe, "import { unitHome } from '../helpers.js';\nimport type Docker from 'dockerode';\n");
      expect(importsOf(probe)).toEqual({ helpers: ['unitHome'], docker: false });
    } finally {
      fs.rmSync(join(probe, '..'), { recursive: true, force: true });
    }
  });
});
