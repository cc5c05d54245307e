/**
 * `npm run docs:config`: writes the configuration table of README.md from the settings of src/config.ts,
 * between its markers (`src/config-table.ts`). `config.test.ts` fails while the README holds another table.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { CONFIG_TABLE_BEGIN, CONFIG_TABLE_END, withConfigTable } from '../src/config-table.ts';

const readmePath = fileURLToPath(new URL('../README.md', import.meta.url));
const readme = readFileSync(readmePath, 'utf8');
const updated = withConfigTable(readme);
if (updated === undefined) {
  process.stderr.write(`README.md needs the markers ${CONFIG_TABLE_BEGIN} and ${CONFIG_TABLE_END}\n`);
  process.exit(1);
}
if (updated === readme) {
  process.stdout.write('README.md: configuration table up to date\n');
} else {
  writeFileSync(readmePath, updated);
  process.stdout.write('README.md: configuration table written\n');
}
