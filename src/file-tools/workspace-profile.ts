import fs from 'node:fs';
import { z } from 'zod';
import { at } from '../fs/fd-path.js';
import { sandboxRead } from '../fs/sandbox.js';

/**
 * What a workspace is: ecosystem, package manager, and the commands that format, lint and test
 * it — detected from its files (package.json and lockfiles, pyproject, go.mod, Cargo.toml,
 * Makefile, ...). Detection is pure; reading goes through the sandbox (the workspace is hostile).
 */

export const WorkspaceProfileSchema = z.object({
  ecosystems: z.array(z.string()),
  package_manager: z.string().nullable(),
  commands: z.object({
    format: z.array(z.string()).optional(),
    lint: z.array(z.string()).optional(),
    test: z.array(z.string()).optional(),
  }),
  detected_from: z.array(z.string()),
});
export type WorkspaceProfile = z.infer<typeof WorkspaceProfileSchema>;

export const MARKERS = [
  'package.json',
  'package-lock.json',
  'pnpm-lock.yaml',
  'yarn.lock',
  'bun.lockb',
  'pyproject.toml',
  'requirements.txt',
  'setup.py',
  'poetry.lock',
  'uv.lock',
  'go.mod',
  'Cargo.toml',
  'Makefile',
] as const;

export interface ProfileInput {
  files: ReadonlySet<string>;
  packageJson?: string;
  pyproject?: string;
  makefile?: string;
}

function json(text: string | undefined): { scripts?: Record<string, string> } | undefined {
  try {
    return text ? JSON.parse(text) : undefined;
  } catch {
    return undefined;
  }
}

/** Pure: marker files (and a few of their contents) → the profile. */
export function detectProfile(input: ProfileInput): WorkspaceProfile {
  const has = (f: string) => input.files.has(f);
  const ecosystems: string[] = [];
  let pm: string | null = null;
  const commands: WorkspaceProfile['commands'] = {};
  const set = (k: keyof WorkspaceProfile['commands'], argv: string[]) => {
    commands[k] ??= argv;
  };

  if (has('package.json')) {
    ecosystems.push('node');
    pm = has('pnpm-lock.yaml') ? 'pnpm' : has('yarn.lock') ? 'yarn' : has('bun.lockb') ? 'bun' : 'npm';
    const scripts = json(input.packageJson)?.scripts ?? {};
    if (scripts.test) set('test', [pm, 'test']);
    if (scripts.lint) set('lint', [pm, 'run', 'lint']);
    if (scripts.format) set('format', [pm, 'run', 'format']);
  }
  if (has('pyproject.toml') || has('requirements.txt') || has('setup.py')) {
    ecosystems.push('python');
    const py = input.pyproject ?? '';
    const tool = has('uv.lock') ? 'uv' : has('poetry.lock') ? 'poetry' : 'pip';
    pm ??= tool;
    const run = (argv: string[]) => (tool === 'pip' ? argv : [tool, 'run', ...argv]);
    set('test', run(['pytest']));
    if (/\[tool\.ruff/.test(py)) {
      set('lint', run(['ruff', 'check', '.']));
      set('format', run(['ruff', 'format', '.']));
    } else if (/\[tool\.black/.test(py)) set('format', run(['black', '.']));
  }
  if (has('go.mod')) {
    ecosystems.push('go');
    pm ??= 'go';
    set('test', ['go', 'test', './...']);
    set('lint', ['go', 'vet', './...']);
    set('format', ['gofmt', '-l', '.']);
  }
  if (has('Cargo.toml')) {
    ecosystems.push('rust');
    pm ??= 'cargo';
    set('test', ['cargo', 'test']);
    set('lint', ['cargo', 'clippy']);
    set('format', ['cargo', 'fmt']);
  }
  if (has('Makefile')) {
    const targets = new Set((input.makefile ?? '').match(/^[A-Za-z0-9_.-]+(?=\s*:)/gm) ?? []);
    for (const k of ['test', 'lint', 'format'] as const) if (targets.has(k)) set(k, ['make', k]);
    if (ecosystems.length === 0) ecosystems.push('make');
  }
  return { ecosystems, package_manager: pm, commands, detected_from: MARKERS.filter((m) => has(m)) };
}

const cache = new Map<string, { signature: string; profile: WorkspaceProfile }>();

/** The profile of the workspace open at rootFd, cached until a marker file changes. */
export function workspaceProfile(rootFd: number, cacheKey: string): WorkspaceProfile {
  const stats: string[] = [];
  const files = new Set<string>();
  for (const m of MARKERS) {
    try {
      const st = fs.lstatSync(at(rootFd, m));
      if (!st.isFile()) continue; // links and specials are not markers
      files.add(m);
      stats.push(`${m}:${st.ino}:${st.size}:${st.mtimeMs}`);
    } catch {
      // absent
    }
  }
  const signature = stats.join('|');
  const hit = cache.get(cacheKey);
  if (hit && hit.signature === signature) return hit.profile;
  const text = (f: string) => (files.has(f) ? sandboxRead(rootFd, f, 256 * 1024)?.toString('utf8') : undefined);
  const read = (f: string) => {
    try {
      return text(f);
    } catch {
      return undefined; // a marker that changed into something else reads as absent
    }
  };
  const profile = detectProfile({
    files,
    packageJson: read('package.json'),
    pyproject: read('pyproject.toml'),
    makefile: read('Makefile'),
  });
  cache.set(cacheKey, { signature, profile });
  return profile;
}
