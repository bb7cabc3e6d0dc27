/**
 * The layer rule of ARCHITECTURE.md, checked by `make test`: a module imports only from its own
 * layer or the layers below it (types included), and there is no import cycle anywhere.
 * Lowest first; a layer is a list of path prefixes under src/.
 */
const LAYERS = [
  ['base', ['base/']],
  ['fs', ['fs/']],
  // Chat channels: each one module (its berth.yaml schema, wire protocol and doctor check) that
  // config/ assembles into berth.yaml's bridges and bridges/ runs on the core.
  ['channels', ['channels/']],
  ['config', ['config/']],
  ['plan', ['plan/']],
  ['launch', ['launch/']],
  ['store', ['store/']],
  // The agent's file tools (folders, the access table, workspace profiles).
  ['file-tools', ['file-tools/']],
  // How containers reach outside: the model gateway and the egress proxy (one socket per run).
  ['outbound', ['outbound/']],
  ['runs', ['runs/', 'workflows/', 'images/']],
  ['admin', ['admin/']],
  // Chat bridges: the core (inbox, lanes, commands) and one adapter per transport.
  ['bridges', ['bridges/']],
  // The MCP servers and tool lists (the file tools' socket face too): main wires them in.
  ['mcp', ['mcp/']],
  ['main', ['main.ts']],
  // The HTTP surface takes its dependencies as an argument: it never imports main.ts.
  ['api', ['api/']],
  ['cli', ['cli/']],
];

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
const pathOf = (prefixes) => `^src/(${prefixes.map(escape).join('|')})`;

const layerRules = LAYERS.slice(0, -1).map(([name, prefixes], i) => ({
  name: `layer-${name}`,
  comment: `${name} may import only from ${LAYERS.slice(0, i + 1)
    .map(([n]) => n)
    .join(', ')}`,
  severity: 'error',
  from: { path: pathOf(prefixes) },
  to: { path: pathOf(LAYERS.slice(i + 1).flatMap(([, p]) => p)) },
}));

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'import cycles load only by accident of hoisting',
      from: {},
      to: { circular: true },
    },
    {
      name: 'in-a-layer',
      severity: 'error',
      comment: 'every source file belongs to a layer (add new folders to LAYERS)',
      from: { path: '^src/', pathNot: pathOf(LAYERS.flatMap(([, p]) => p)) },
      to: {},
    },
    ...layerRules,
    {
      name: 'api-not-main',
      severity: 'error',
      comment: 'the composition root hands the app its dependencies',
      from: { path: '^src/api/' },
      to: { path: '^src/main\\.ts$' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(node_modules|dist|test)' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};
