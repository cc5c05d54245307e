/**
 * The part of dcmjs (which ships no types) that the project uses: writing Part 10 files (the dicom-receive
 * module's file meta information, the images of `bench/dicom-images.ts`).
 */
declare module 'dcmjs' {
  interface DicomDict {
    /** The data set after the meta information, in the DICOM JSON model. */
    dict: Record<string, unknown>;
    /**
     * Preamble, `DICM`, the meta information (with its group length), then the data set.
     * `fragmentMultiframe: false` writes each frame of encapsulated pixel data as one fragment.
     */
    write(options?: { fragmentMultiframe?: boolean }): ArrayBuffer;
  }
  const dcmjs: {
    readonly data: {
      readonly DicomMetaDictionary: {
        /** Keyword-named values -> the DICOM JSON model (tag -> { vr, Value }). */
        denaturalizeDataset(dataset: Record<string, unknown>): Record<string, unknown>;
      };
      readonly DicomDict: new (meta: Record<string, unknown>) => DicomDict;
    };
  };
  export default dcmjs;
}
