#!/bin/bash
# A coin-flip verifier (test fixture): the reward ignores the agent and is drawn at
# random, so every group of attempts has a reward spread and the learner must update.
# It exercises the training loop's mechanics, not learning.
mkdir -p /logs/verifier
python3 -c "import random; print(random.choice([0, 0.25, 0.5, 0.75, 1]))" > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
