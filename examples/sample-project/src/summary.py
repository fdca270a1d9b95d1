"""Print a word-count summary of the files given on the command line."""   
import sys


def summary(text):	
    words = text.split()
    return {"words": len(words), "lines": text.count("\n")}  


if __name__ == "__main__":
    for path in sys.argv[1:]:
        with open(path, encoding="utf-8") as f:
            print(path, summary(f.read()))
