import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type { PackageAsset } from './package-assets.js';

/**
 * A page's own script and style (src/api/<page>/client/: TypeScript with the DOM lib, checked by
 * tsconfig.client.json, and page.css), served at paths that name their content, so the page's
 * CSP allows them with 'self' and no hash is ever pasted by hand. `npm run build` bundles them
 * into dist/pages/ (scripts/build-pages.mjs calls writePageBundles); run from source (tsx, the
 * tests), berth bundles them once at start with esbuild, the bundler tsx itself runs on. Either
 * way the source is found beside this module: src/api/ (dist/ holds only the bundles).
 */
export const PAGES = ['chat', 'console'] as const;
export type PageName = (typeof PAGES)[number];

export interface PageBundle {
  script: PackageAsset;
  style: PackageAsset;
}

const TYPES = { js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8' } as const;

/** The bundler's work, the same at build and at start: one classic script (no module loader needed) and one stylesheet per page. */
function bundleOptions(page: PageName) {
  const dir = fileURLToPath(new URL(`./${page}/client/`, import.meta.url));
  return {
    entryPoints: { [page]: `${dir}main.ts`, [`${page}-style`]: `${dir}page.css` },
    // The bundle names its sources relative to the checkout, whatever the cwd: the same bytes, the same path.
    absWorkingDir: fileURLToPath(new URL('../..', import.meta.url)),
    bundle: true,
    format: 'iife' as const,
    target: 'es2022',
    charset: 'utf8' as const,
    legalComments: 'none' as const,
    logLevel: 'silent' as const,
  };
}

/** Bundled at build: dist/pages/<page>.js and <page>-style.css beside dist/api/. */
const builtFile = (page: PageName, ext: 'js' | 'css') =>
  fileURLToPath(new URL(`../pages/${ext === 'js' ? page : `${page}-style`}.${ext}`, import.meta.url));

function bundleFromSource(page: PageName): { js: string; css: string } {
  // Only from source: dist/ has its bundles, and esbuild is a build tool, not a dependency.
  let esbuild: typeof import('esbuild');
  try {
    esbuild = createRequire(import.meta.url)('esbuild') as typeof import('esbuild');
  } catch {
    throw new Error(
      `the ${page} page's bundle is missing (${builtFile(page, 'js')}) and esbuild is not installed to make it: run "npm run build"`,
    );
  }
  const out = esbuild.buildSync({ ...bundleOptions(page), write: false, outdir: '/pages' });
  const text = (ext: string) => out.outputFiles.find((f) => f.path.endsWith(ext))?.text ?? '';
  return { js: text('.js'), css: text('.css') };
}

function asset(prefix: string, page: PageName, ext: 'js' | 'css', body: string): PackageAsset {
  return {
    path: `${prefix}/${page}-${createHash('sha256').update(body).digest('hex').slice(0, 12)}.${ext}`,
    body,
    contentType: TYPES[ext],
  };
}

/** The page's script and style, read (or bundled) once per process by the caller. */
export function pageBundle(prefix: string, page: PageName): PageBundle {
  const built = fs.existsSync(builtFile(page, 'js'));
  const { js, css } = built
    ? { js: fs.readFileSync(builtFile(page, 'js'), 'utf8'), css: fs.readFileSync(builtFile(page, 'css'), 'utf8') }
    : bundleFromSource(page);
  return { script: asset(prefix, page, 'js', js), style: asset(prefix, page, 'css', css) };
}

/** `npm run build` (scripts/build-pages.ts, from source): every page's bundle into <dist>/pages/. */
export async function writePageBundles(outdir: string): Promise<string[]> {
  const esbuild = await import('esbuild');
  const written: string[] = [];
  for (const page of PAGES) {
    const out = await esbuild.build({ ...bundleOptions(page), outdir, metafile: true });
    written.push(...Object.keys(out.metafile.outputs));
  }
  return written;
}
