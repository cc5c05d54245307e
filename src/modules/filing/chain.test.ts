import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FILING_CHAIN, defaultRoutineCatalog, findStep } from './index.ts';

/** The step of `name`, which the table must have. */
function stepOf(name: string) {
  const step = findStep(name);
  assert.ok(step, `no step ${name} in FILING_CHAIN`);
  return step;
}

describe('FILING_CHAIN', () => {
  it('declares each step once, in the order a DICOM file runs them', () => {
    assert.deepEqual(
      FILING_CHAIN.map((step) => step.routine),
      [
        'DICOM_SEED',
        'DEVICE_PROFILE',
        'EXTRACT_IMAGE',
        'PATIENT_MATCH',
        'MAKE_THUMBNAILS',
        'FILE_BIOMETRY',
        'ATTACH_TO_EVENT',
        'CLEAN_UP',
      ],
    );
  });

  it('names only routines of the catalog, and the catalog runs each step as the table defines it', () => {
    for (const step of FILING_CHAIN) {
      assert.equal(defaultRoutineCatalog.get(step.routine), step.definition, step.routine);
      for (const next of step.next)
        assert.ok(
          defaultRoutineCatalog.names.includes(next.routine),
          `${step.routine} -> ${next.routine}: not in the catalog`,
        );
    }
  });

  it('runs EXTRACT_IMAGE after DICOM_SEED (and DEVICE_PROFILE), then PATIENT_MATCH, whatever they return', () => {
    const none = { appended: [], priority: [] };
    assert.deepEqual(stepOf('DICOM_SEED').nextFor(undefined), { ...none, appended: ['EXTRACT_IMAGE'] });
    assert.deepEqual(stepOf('DEVICE_PROFILE').nextFor(undefined), { ...none, appended: ['EXTRACT_IMAGE'] });
    assert.deepEqual(stepOf('EXTRACT_IMAGE').nextFor(undefined), { ...none, appended: ['PATIENT_MATCH'] });
  });

  it("files after PATIENT_MATCH by the profile's filer, thumbnails first when an image lacks them", () => {
    const match = stepOf('PATIENT_MATCH');
    const cases = [
      [{ filer: 'generic', hasImagesWithoutThumbnails: false }, ['ATTACH_TO_EVENT', 'CLEAN_UP']],
      [
        { filer: 'generic', hasImagesWithoutThumbnails: true },
        ['MAKE_THUMBNAILS', 'ATTACH_TO_EVENT', 'CLEAN_UP'],
      ],
      [{ filer: 'biometry', hasImagesWithoutThumbnails: false }, ['FILE_BIOMETRY', 'CLEAN_UP']],
      [
        { filer: 'biometry', hasImagesWithoutThumbnails: true },
        ['MAKE_THUMBNAILS', 'FILE_BIOMETRY', 'CLEAN_UP'],
      ],
    ] as const;
    for (const [outcome, appended] of cases)
      assert.deepEqual(match.nextFor(outcome), { appended, priority: [] }, JSON.stringify(outcome));
  });

  it('files a FILE_BIOMETRY file without biometry by ATTACH_TO_EVENT before its pending siblings', () => {
    const biometry = stepOf('FILE_BIOMETRY');
    assert.deepEqual(biometry.nextFor({ kind: 'filed-generically' }), {
      appended: [],
      priority: ['ATTACH_TO_EVENT'],
    });
    assert.deepEqual(biometry.nextFor({ kind: 'filed' }), { appended: [], priority: [] });
  });

  it('ends the chain at the filers, the thumbnails and CLEAN_UP', () => {
    for (const name of ['MAKE_THUMBNAILS', 'ATTACH_TO_EVENT', 'CLEAN_UP'])
      assert.deepEqual(stepOf(name).next, [], name);
  });

  it('says in words the condition of every conditional next routine', () => {
    for (const step of FILING_CHAIN)
      for (const next of step.next)
        if (next.when !== undefined) assert.match(next.when.says, /\w/, `${step.routine} -> ${next.routine}`);
  });
});
