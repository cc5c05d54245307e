// Manual crop of a failed signature capture (loaded only on that page, after cropper.min.js).
// The 16:9 box of the original crop screen; on submit the cropped PNG goes into the form as a data URL.
'use strict';
document.addEventListener('DOMContentLoaded', function () {
  var image = document.getElementById('crop-image');
  var form = document.getElementById('crop-form');
  var field = document.getElementById('crop-data');
  if (!image || !form || !field || typeof window.Cropper !== 'function') return;
  var cropper = null;
  function start() {
    cropper = new window.Cropper(image, {
      aspectRatio: 16 / 9,
      viewMode: 1,
      autoCropArea: 0.8,
      // No re-download of the image to read EXIF orientation, no cross-origin tricks: the capture is
      // served by this console as it was stored.
      checkOrientation: false,
      checkCrossOrigin: false,
      zoomOnWheel: false,
    });
  }
  if (image.complete && image.naturalWidth > 0) start();
  else image.addEventListener('load', start);
  form.addEventListener('submit', function () {
    if (!cropper) return;
    var canvas = cropper.getCroppedCanvas({ maxWidth: 1600, maxHeight: 900, fillColor: '#ffffff' });
    if (canvas) field.value = canvas.toDataURL('image/png');
  });
});
