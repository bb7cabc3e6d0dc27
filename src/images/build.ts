import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import tar from 'tar-fs';
import type { BerthConfig } from '../config/berth-config.js';
import { BerthError } from '../base/errors.js';
import { buildAgentImage } from './agent-image.js';
import { compileBridge, IMAGES_DIR } from './bridge.js';
import type { ImageStore } from '../launch/images.js';

// Re-exported for the tests that compile berth-bridge on their own.
export { compileBridge, IMAGES_DIR } from './bridge.js';
export const BUSYBOX_PATHS = ['/bin/busybox', '/usr/bin/busybox'];
export const IMAGE_NAMES = ['shell', 'agent'] as const;
export type ImageName = (typeof IMAGE_NAMES)[number];

/** True when an ELF binary has no program interpreter, i.e. runs in an empty (scratch) image. */
export function isStaticElf(file: string): boolean {
  const buf = fs.readFileSync(file);
  if (buf.length < 64 || buf.readUInt32BE(0) !== 0x7f454c46 || buf[4] !== 2) return false;
  const phoff = Number(buf.readBigUInt64LE(0x20));
  const phentsize = buf.readUInt16LE(0x36);
  const phnum = buf.readUInt16LE(0x38);
  for (let i = 0; i < phnum; i++) {
    if (buf.readUInt32LE(phoff + i * phentsize) === 3 /* PT_INTERP */) return false;
  }
  return true;
}

export function findStaticBusybox(): string {
  for (const candidate of BUSYBOX_PATHS) {
    if (fs.existsSync(candidate) && isStaticElf(fs.realpathSync(candidate))) return fs.realpathSync(candidate);
  }
  throw new BerthError('IMAGE_MISSING', 'no static busybox found to build the shell image from', {
    hint: 'install it: apt-get install -y busybox-static',
  });
}

export function imageTag(name: ImageName, config: BerthConfig): string {
  return config.images[name];
}

/** Build one of berth's images offline; `built` is false when the agent image was up to date. */
export async function buildImage(opts: {
  config: BerthConfig;
  name: ImageName;
  /** For the agent image: where CLI downloads are cached (the home's cache dir). */
  cacheDir: string;
  base?: string;
  force?: boolean;
  images: ImageStore;
  onProgress?: (line: string) => void;
}): Promise<{ tag: string; built: boolean }> {
  const tag = imageTag(opts.name, opts.config);
  const onProgress = opts.onProgress ?? (() => {});
  if (opts.name === 'agent') {
    return buildAgentImage({ images: opts.images, tag, cacheDir: opts.cacheDir, base: opts.base, force: opts.force, onProgress });
  }
  const context = fs.mkdtempSync(join(os.tmpdir(), `berth-image-${opts.name}-`));
  try {
    fs.cpSync(join(IMAGES_DIR, opts.name), context, { recursive: true });
    fs.copyFileSync(findStaticBusybox(), join(context, 'busybox'));
    // Every image gets berth-bridge, the agent's way to the gateway socket.
    compileBridge(join(IMAGES_DIR, 'shell', 'berth-bridge.c'), join(context, 'berth-bridge'));
    await opts.images.build({
      context: tar.pack(context) as unknown as NodeJS.ReadableStream,
      tag,
      buildArgs: opts.base ? { BASE: opts.base } : undefined,
      onProgress,
    });
    return { tag, built: true };
  } finally {
    fs.rmSync(context, { recursive: true, force: true });
  }
}
