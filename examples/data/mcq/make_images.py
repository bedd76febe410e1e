"""Regenerate the bundled multiple-choice image set (deterministic, a few KB in all)."""

import csv
import pathlib

from PIL import Image, ImageDraw

HERE = pathlib.Path(__file__).parent
COLORS = {"red": (220, 40, 40), "green": (40, 170, 60), "blue": (40, 80, 220), "yellow": (230, 210, 40)}
SHAPES = ["circle", "square", "triangle"]


def draw(shape: str, color: tuple, count: int, path: pathlib.Path) -> None:
    img = Image.new("RGB", (96, 64), (255, 255, 255))
    d = ImageDraw.Draw(img)
    for i in range(count):
        x0, y0 = 6 + i * 30, 20
        box = (x0, y0, x0 + 24, y0 + 24)
        if shape == "circle":
            d.ellipse(box, fill=color)
        elif shape == "square":
            d.rectangle(box, fill=color)
        else:
            d.polygon([(x0 + 12, y0), (x0, y0 + 24), (x0 + 24, y0 + 24)], fill=color)
    img.save(path, optimize=True)


def main() -> None:
    rows = []
    names = list(COLORS)
    for i in range(12):
        shape, color, count = SHAPES[i % 3], names[i % 4], 1 + i % 3
        file = f"img_{i:02d}.png"
        draw(shape, COLORS[color], count, HERE / file)
        if i % 2 == 0:
            q, choices, answer = f"What color is the {shape}?", names, color
        else:
            q, choices, answer = f"How many {shape}s are in the picture?", ["1", "2", "3", "4"], str(count)
        letters = "ABCD"
        rows.append({
            "image": file, "question": q,
            "choices": " ".join(f"{letters[j]}) {c}" for j, c in enumerate(choices)),
            "answer": letters[choices.index(answer)],
        })
    with open(HERE / "questions.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["image", "question", "choices", "answer"])
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
