"""Real pictures, sound and documents for the media tests, made by Pillow and the standard
library (no files checked in, no network).
"""

from __future__ import annotations

import io
import wave

from PIL import Image


def picture(image_format: str, width: int = 64, height: int = 48, **options: object) -> bytes:
    """A real image file of ``width`` x ``height`` in ``image_format`` (``"PNG"``, ``"JPEG"``,
    ``"GIF"``, ``"WEBP"``), as Pillow writes it.
    """
    image = Image.new("RGB", (width, height), (200, 40, 90))
    for x in range(width):
        image.putpixel((x, x % height), (0, 0, 0))
    out = io.BytesIO()
    image.save(out, format=image_format, **options)
    return out.getvalue()


def png(width: int = 64, height: int = 48) -> bytes:
    return picture("PNG", width, height)


def wav(frames: int = 800) -> bytes:
    """A real WAV file of ``frames`` silent 16-bit mono frames at 8 kHz."""
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(8000)
        writer.writeframes(b"\0\0" * frames)
    return out.getvalue()


def pdf(text: str = "hello") -> bytes:
    """A small, valid one-page PDF (Pillow writes it)."""
    out = io.BytesIO()
    Image.new("RGB", (20, 10), (255, 255, 255)).save(out, format="PDF", title=text)
    return out.getvalue()
