import argparse


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch_size", type=int, default=16
    args = parser.parse_args()


if __name__ == "__main__":
    main()
