import { resolve } from 'node:path';
import { writePageBundles } from '../src/api/page-bundle.js';

// `npm run build`, after tsc: the pages' scripts and styles bundled into dist/pages/ (src/api/page-bundle.ts).
const written = await writePageBundles(resolve(process.argv[2] ?? 'dist', 'pages'));
console.log(`pages: ${written.join(', ')}`);
