"""What runs trainers: the small base policy's build (base_model.py) and the comparison's arms
(compare_arms.py). Above the trainers, below the commands."""
