/**
 * Every package of the lockfile that has an install script is reviewed in package.json's `allowScripts`
 * (allowed or denied by name), so that `npm ci` prints no `install-scripts` warning (npm 11.16 and later)
 * and npm 12, which runs only the allowed ones, installs the same working tree.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';

const ROOT = path.resolve(import.meta.dirname, '..');

describe('install scripts', () => {
  it("are each allowed or denied in package.json's allowScripts", async () => {
    const manifest = JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')) as {
      allowScripts?: Record<string, boolean>;
    };
    const lock = JSON.parse(await readFile(path.join(ROOT, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { hasInstallScript?: boolean; name?: string }>;
    };
    const withScripts = Object.entries(lock.packages)
      .filter(([, entry]) => entry.hasInstallScript === true)
      .map(([where, entry]) => entry.name ?? where.slice(where.lastIndexOf('node_modules/') + 13));
    assert.ok(withScripts.length > 0, 'the lockfile records install scripts');
    const reviewed = manifest.allowScripts ?? {};
    assert.deepEqual(
      withScripts.filter((name) => typeof reviewed[name] !== 'boolean'),
      [],
      'not in allowScripts',
    );
    // The one denied: its postinstall only prints a donation banner.
    assert.equal(reviewed['core-js-pure'], false);
  });
});
